package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// syncBuffer is a buffer a command writes from its goroutine while the
// test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// service runs a long-running command in a goroutine until the test ends.
type service struct {
	out, err syncBuffer
	code     chan int
	cancel   context.CancelFunc
}

func startCommand(t *testing.T, getenv func(string) string, args ...string) *service {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{code: make(chan int, 1), cancel: cancel}
	go func() { s.code <- Run(ctx, IO{Stdout: &s.out, Stderr: &s.err, Getenv: getenv}, args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.code:
		case <-time.After(30 * time.Second):
			t.Errorf("manifold %v did not stop within 30s", args)
		}
	})
	return s
}

// waitFor polls the service's output until re matches it and returns the
// first submatch.
func (s *service) waitFor(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := re.FindStringSubmatch(s.out.String() + s.err.String()); m != nil {
			return m[len(m)-1]
		}
		select {
		case code := <-s.code:
			t.Fatalf("exited with %d waiting for %s:\n%s%s", code, re, s.out.String(), s.err.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s:\n%s%s", re, s.out.String(), s.err.String())
		}
	}
}

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

var listeningRE = regexp.MustCompile(`listening on (nats://\S+)`)

// TestServerRequiresCredentials: `manifold server` without --config admits
// only the nkeys it generated, mode 0600, each with its role's
// permissions; a coordinator, a worker and a client find them without
// flags and carry a run through; an anonymous client is refused.
func TestServerRequiresCredentials(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	env := envOf(map[string]string{credentialsEnv: creds, "XDG_CONFIG_HOME": filepath.Join(dir, "config")})
	srv := startCommand(t, env, "server", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(dir, "js"))
	url := srv.waitFor(t, listeningRE)

	info, err := os.Stat(creds)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "credentials directory mode")
	for _, r := range roles {
		info, err := os.Stat(seedFile(creds, r))
		require.NoError(t, err, "role %s", r)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "%s mode", r)
	}

	// Anonymous: refused.
	_, err = nats.Connect(url, nats.Timeout(2*time.Second))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	// A key the server does not know: refused.
	other := t.TempDir()
	_, err = ensureCredentials(other)
	require.NoError(t, err)
	_, err = connectAs(t, url, seedFile(other, roleAdmin))
	require.ErrorIs(t, err, nats.ErrAuthorization)

	// The nats CLI context names the server and the admin key.
	data, err := os.ReadFile(filepath.Join(dir, "config", "nats", "context", "manifold.json"))
	require.NoError(t, err)
	var nctx natsContext
	require.NoError(t, json.Unmarshal(data, &nctx))
	require.Equal(t, url, nctx.URL)
	require.Equal(t, seedFile(creds, roleAdmin), nctx.NKey)
	admin, err := connectAs(t, url, nctx.NKey)
	require.NoError(t, err)

	// Coordinator and worker find their keys without flags.
	env = envOf(map[string]string{credentialsEnv: creds, "MANIFOLD_SERVER": url})
	startCommand(t, env, "coordinator", "--name", "c1").waitFor(t, regexp.MustCompile(`(coordinator started)`))
	startCommand(t, env, "worker", "--name", "w1", "--cache-dir", filepath.Join(dir, "cache")).waitFor(t, regexp.MustCompile(`(worker started)`))

	// So does the client: a run goes through.
	target := filepath.Join(dir, "motd")
	manifest := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("resources:\n  - {type: file, name: "+target+", content: \"hello\\n\", ensure: present}\n"), 0o600))
	var out, errOut syncBuffer
	code := Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: env}, []string{"run", "--follow", "--timeout", "30s", manifest})
	require.Equal(t, ExitOK, code, "%s%s", out.String(), errOut.String())
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(got))

	// The submitter can submit and read, but neither consume tasks nor
	// publish outcomes; the worker cannot submit runs; the admin can do
	// anything.
	submitter, violations := connectWatched(t, url, seedFile(creds, roleSubmitter))
	js, err := jetstream.New(submitter)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err = js.Consumer(ctx, bus.StreamTasks, "tasks-default")
	cancel()
	require.Error(t, err, "the submitter read the tasks consumer")
	require.NoError(t, submitter.Publish("manifold.outcomes.r1", []byte("{}")))
	require.NoError(t, submitter.Flush())
	violations.wait(t, "manifold.outcomes.r1")

	worker, wviolations := connectWatched(t, url, seedFile(creds, roleWorker))
	wjs, err := jetstream.New(worker)
	require.NoError(t, err)
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	_, err = wjs.Consumer(ctx, bus.StreamTasks, "tasks-default")
	cancel()
	require.NoError(t, err, "the worker reads its pool's consumer")
	require.NoError(t, worker.Publish(bus.SubjectRunSubmit, []byte("{}")))
	require.NoError(t, worker.Flush())
	wviolations.wait(t, bus.SubjectRunSubmit)

	ajs, err := jetstream.New(admin)
	require.NoError(t, err)
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	_, err = ajs.Consumer(ctx, bus.StreamTasks, "tasks-default")
	cancel()
	require.NoError(t, err, "the admin reads everything")
}

func connectAs(t *testing.T, url, seed string, more ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(seed)
	require.NoError(t, err)
	nc, err := nats.Connect(url, append(more, o, nats.Timeout(2*time.Second))...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// violationWatch receives the permission violations a connection is told
// of.
type violationWatch chan string

func (v violationWatch) wait(t *testing.T, subject string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case msg := <-v:
			if strings.Contains(msg, subject) {
				return
			}
		case <-timeout:
			t.Fatalf("no permission violation for %s reported", subject)
		}
	}
}

func connectWatched(t *testing.T, url, seed string) (*nats.Conn, violationWatch) {
	t.Helper()
	v := make(violationWatch, 64)
	opts := []nats.Option{nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case v <- err.Error():
			default:
			}
		}
	})}
	if filepath.Base(seed) == string(roleWorker)+".nk" {
		// The worker role gets replies under its own inbox prefix only.
		opts = append(opts, nats.CustomInboxPrefix(bus.WorkerInboxPrefix))
	}
	nc, err := connectAs(t, url, seed, opts...)
	require.NoError(t, err)
	return nc, v
}

// TestCredentialsDir: flag, then variable, then the per-host default for
// root, else the user's configuration directory.
func TestCredentialsDir(t *testing.T) {
	for _, tc := range []struct {
		flag     string
		env      map[string]string
		euid     int
		want     string
		explicit bool
	}{
		{flag: "/f", env: map[string]string{credentialsEnv: "/e"}, euid: 0, want: "/f", explicit: true},
		{env: map[string]string{credentialsEnv: "/e"}, euid: 1000, want: "/e", explicit: true},
		{env: map[string]string{"HOME": "/home/u"}, euid: 0, want: systemCredentialsDir},
		{env: map[string]string{"HOME": "/home/u"}, euid: 1000, want: "/home/u/.config/manifold/credentials"},
		{env: map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/x"}, euid: 1000, want: "/x/manifold/credentials"},
	} {
		got, explicit, err := credentialsDir(tc.flag, envOf(tc.env), tc.euid)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%+v", tc)
		require.Equal(t, tc.explicit, explicit, "%+v", tc)
	}
}

// TestServerStoreAndAuthFlags: a second server on a live server's store
// directory is refused; --insecure-no-auth admits anonymous clients;
// --config excludes the generated credentials; a NATS context the user
// wrote is left alone; a named credentials directory without the role's
// key is a usage error.
func TestServerStoreAndAuthFlags(t *testing.T) {
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "config", "nats", "context")
	require.NoError(t, os.MkdirAll(ctxDir, 0o700))
	mine := []byte(`{"url": "nats://elsewhere:4222"}`)
	require.NoError(t, os.WriteFile(filepath.Join(ctxDir, "manifold.json"), mine, 0o600))
	env := envOf(map[string]string{credentialsEnv: filepath.Join(dir, "credentials"), "XDG_CONFIG_HOME": filepath.Join(dir, "config")})
	store := filepath.Join(dir, "js")
	srv := startCommand(t, env, "server", "--listen", "127.0.0.1:0", "--store-dir", store)
	srv.waitFor(t, listeningRE)
	srv.waitFor(t, regexp.MustCompile(`(nats CLI context not written: .*not written by manifold)`))
	got, err := os.ReadFile(filepath.Join(ctxDir, "manifold.json"))
	require.NoError(t, err)
	require.Equal(t, mine, got, "the user's own context was overwritten")

	var out, errOut syncBuffer
	code := Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: env}, []string{"server", "--listen", "127.0.0.1:0", "--store-dir", store})
	require.Equal(t, ExitUnavailable, code)
	require.Contains(t, errOut.String(), "is used by a running server (pid ")

	code = Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: env}, []string{"server", "--config", "x.conf", "--insecure-no-auth", "--store-dir", store})
	require.Equal(t, ExitInvalid, code)

	code = Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: envOf(map[string]string{credentialsEnv: t.TempDir()})}, []string{"workers"})
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut.String(), "submitter.nk")

	open := startCommand(t, env, "server", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(dir, "js2"), "--insecure-no-auth")
	url := open.waitFor(t, listeningRE)
	require.Contains(t, open.err.String(), "WARNING: --insecure-no-auth")
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	require.NoError(t, err)
	nc.Close()
}
