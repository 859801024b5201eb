package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/internal/tmpdir"
)

// TestStartingEngineStartsWorkerOnFacts: once handed this host's facts,
// the starting engine starts its worker by itself, the command not
// waiting on it (it compiles meanwhile), and the worker publishes those
// facts.
func TestStartingEngineStartsWorkerOnFacts(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startEmbeddedAsync(ctx, quietEmbeddedOpts())
	select {
	case <-s.done:
		t.Fatal("the engine finished starting without the facts")
	default:
	}
	s.startWorker(map[string]any{"role": "db"})
	var r startedEngine
	select {
	case r = <-s.done: // what wait receives: the start went on without it
	case <-ctx.Done():
		t.Fatal("the engine did not finish starting within 30s")
	}
	require.NoError(t, r.err)
	defer r.e.close()
	require.NotNil(t, r.e.worker, "the worker started with the facts")
	entry, err := r.e.bus.Workers().Get(ctx, "embedded")
	require.NoError(t, err, "the worker registered")
	require.Contains(t, string(entry.Value), `"role":"db"`)
}

// TestStartingEngineStartsOnceFactsAreGathered: held for the facts (a
// large manifest), the starting engine waits for this host's facts to be
// gathered (the compile needs them first) and makes nothing before; a
// start whose context ends while it waits returns that error. Only a
// manifest file of holdEngineAt bytes or more holds it.
func TestStartingEngineStartsOnceFactsAreGathered(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := quietEmbeddedOpts()
	o.HoldForFacts = true
	s := startEmbeddedAsync(ctx, o)
	select {
	case <-s.done:
		t.Fatal("the engine started before the facts were gathered")
	default:
	}
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "no store made before the facts are gathered")
	s.factsGathered()
	s.factsGathered() // (once is enough; twice is harmless)
	s.startWorker(map[string]any{})
	e, err := s.wait()
	require.NoError(t, err)
	defer e.close()
	require.DirExists(t, e.dir)
	require.Equal(t, tmp, filepath.Dir(e.dir))

	ended, stop := context.WithCancel(context.Background())
	stop()
	o = quietEmbeddedOpts()
	o.StartAfter = make(chan struct{}) // never closed
	_, err = startEmbedded(ended, o)
	require.ErrorIs(t, err, context.Canceled)

	dir := t.TempDir()
	small, large := filepath.Join(dir, "small.yaml"), filepath.Join(dir, "large.yaml")
	require.NoError(t, os.WriteFile(small, make([]byte, holdEngineAt-1), 0o644))
	require.NoError(t, os.WriteFile(large, make([]byte, holdEngineAt), 0o644))
	require.False(t, holdEngineForFacts(small))
	require.True(t, holdEngineForFacts(large))
	require.False(t, holdEngineForFacts(dir), "a directory")
	require.False(t, holdEngineForFacts(filepath.Join(dir, "absent.yaml")))
}

// TestStartingEngineStoresTheBundle: a bundle handed to the starting
// engine is kept (bus.KeepBundle) while its coordinator and worker start,
// and wait returns once it is (its name, or why it was not: a bundle over
// the store's limit); a wait with no bundle handed keeps none.
func TestStartingEngineStoresTheBundle(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	archive := []byte("a bundle's bytes")
	for _, tc := range []struct {
		name    string
		archive []byte
		hand    bool
		err     error
	}{
		{"stored", archive, true, nil},
		{"over the limit", make([]byte, 64<<20+1), true, bus.ErrTooLarge},
		{"none handed", nil, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startEmbeddedAsync(ctx, quietEmbeddedOpts())
			s.startWorker(map[string]any{})
			if tc.hand {
				s.storeBundle(tc.archive)
			}
			e, err := s.wait()
			require.NoError(t, err)
			defer e.close()
			switch {
			case tc.err != nil:
				require.ErrorIs(t, e.bundleErr, tc.err)
				require.Empty(t, e.bundle)
			case !tc.hand:
				require.NoError(t, e.bundleErr)
				require.Empty(t, e.bundle)
			default:
				require.NoError(t, e.bundleErr)
				require.NotEmpty(t, e.bundle)
				got, err := e.bus.GetBundle(ctx, e.bundle)
				require.NoError(t, err)
				require.Equal(t, tc.archive, got)
			}
			require.NotNil(t, e.worker, "the engine is up")
		})
	}
}

// TestStartingEngineAbandoned: a command that ends before handing the
// facts over (an invalid manifest) or after stops the engine and
// removes its store.
func TestStartingEngineAbandoned(t *testing.T) {
	for _, handed := range []bool{false, true} {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		s := startEmbeddedAsync(context.Background(), quietEmbeddedOpts())
		if handed {
			s.startWorker(map[string]any{})
		}
		done := make(chan struct{})
		go func() { s.abandon(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("handed=%v: abandon did not return within 30s", handed)
		}
		stores, err := filepath.Glob(filepath.Join(tmp, embeddedStorePrefix+"*"))
		require.NoError(t, err)
		require.Empty(t, stores, "handed=%v: the store is removed", handed)
		entries, err := os.ReadDir(tmp)
		require.NoError(t, err)
		require.Empty(t, entries)
	}
}

// TestCloseBeforeExitStopsWorkerAndRemovesStore: the close of a process
// about to exit stops the worker and the coordinator and removes the
// store; the server is left for the exit.
func TestCloseBeforeExitStopsWorkerAndRemovesStore(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	e, err := startEmbedded(context.Background(), quietEmbeddedOpts())
	require.NoError(t, err)
	e.closeBeforeExit()
	defer e.close() // what the exit does: the server stops (the test process goes on)
	require.NoDirExists(t, e.dir)
	_, err = e.bus.Workers().Get(context.Background(), "embedded")
	require.Error(t, err, "the worker deregistered as it stopped")
	probe, err := e.srv.Connect("probe")
	require.NoError(t, err, "the server is left for the exit")
	defer probe.Close()
	require.NoError(t, probe.Flush())
}

// TestPackBundleThenPut: a bundle packed without a bus (while the embedded
// engine starts) and put once the bus is there is the bundle uploadBundle
// stores, and the request names it as uploadBundle's does.
func TestPackBundleThenPut(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "motd.txt"), []byte("hello\n"), 0o600))
	require.NoError(t, os.WriteFile(path, []byte("resources:\n  - file:\n      - "+filepath.Join(dir, "motd")+
		":\n          ensure: present\n          content: \"{{ file('motd.txt') }}\"\n"), 0o600))
	tree, err := compile.Build(path, compile.Opts{})
	require.NoError(t, err)
	big := map[string]any{"blob": strings.Repeat("x", maxInlineData)} // travels in the bundle

	packed := bus.RunRequest{RunID: "r1", Data: big}
	archive, err := packBundle(&packed, path, tree, true)
	require.NoError(t, err)
	require.Empty(t, packed.Bundle, "not stored yet")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := startEmbedded(ctx, quietEmbeddedOpts())
	require.NoError(t, err)
	defer e.close()
	require.NoError(t, putBundle(ctx, e.bus, &packed, archive))

	tree2, err := compile.Build(path, compile.Opts{})
	require.NoError(t, err)
	uploaded := bus.RunRequest{RunID: "r1", Data: big}
	require.NoError(t, uploadBundle(ctx, e.bus, &uploaded, path, tree2, true))
	require.Equal(t, uploaded, packed)
	require.NotEmpty(t, packed.Bundle)
	require.Equal(t, runDataFile, packed.DataFile)
	stored, err := e.bus.GetBundle(ctx, packed.Bundle)
	require.NoError(t, err)
	require.Equal(t, archive, stored)
}

// TestEmbeddedStoreOnTmpfs: without TMPDIR the store of an embedded
// engine is made in /dev/shm (a tmpfs: no disk I/O to make and remove
// it) and removed at close; with TMPDIR, in TMPDIR.
func TestEmbeddedStoreOnTmpfs(t *testing.T) {
	if err := syscall.Access(tmpdir.Shm, 0o2|0o1); err != nil {
		t.Skipf("%s: %v", tmpdir.Shm, err)
	}
	for _, env := range []string{"", t.TempDir()} {
		t.Setenv("TMPDIR", env)
		want := tmpdir.Shm
		if env != "" {
			want = env
		}
		e, err := startEmbedded(t.Context(), quietEmbeddedOpts())
		require.NoError(t, err)
		require.Equal(t, want, filepath.Dir(e.dir), "TMPDIR=%q", env)
		require.FileExists(t, filepath.Join(e.dir, bus.StoreLockFile))
		e.close()
		require.NoDirExists(t, e.dir)
	}
}
