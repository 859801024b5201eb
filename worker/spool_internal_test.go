package worker

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// offlineRuns returns n offline runs, oldest first (their IDs sort by
// time).
func offlineRuns(n int) []bus.OfflineRun {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	out := make([]bus.OfflineRun, n)
	for i := range out {
		start := at.Add(time.Duration(i) * time.Second)
		out[i] = bus.OfflineRun{RunID: newOfflineRunID(start), Trigger: "drift", AssignmentVersion: 1,
			StartedAt: start, FinishedAt: start.Add(time.Millisecond), Total: 1,
			Outcomes: []bus.OfflineOutcome{{Ref: "file#/etc/motd", Status: bus.TaskChanged, Changed: true}}}
	}
	return out
}

func spooledIDs(sp *spool) []string {
	var ids []string
	for _, r := range sp.pending() {
		ids = append(ids, r.Run.RunID)
	}
	return ids
}

func runIDsOf(runs []bus.OfflineRun) []string {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	return ids
}

func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	slices.Sort(names)
	return names
}

// The spool keeps DefaultSpoolMax runs; the next one drops the oldest,
// with a warning naming it.
func TestSpoolBoundAtDefault(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	sp, err := openSpool("", DefaultSpoolMax, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	runs := offlineRuns(DefaultSpoolMax + 1)
	for _, r := range runs[:DefaultSpoolMax] {
		require.NoError(t, sp.add(r, "app"))
	}
	require.Equal(t, runIDsOf(runs[:DefaultSpoolMax]), spooledIDs(sp), "at the bound: every run kept, oldest first")
	require.Empty(t, logs.String())
	require.Equal(t, DefaultSpoolMax, sp.count("app"))

	require.NoError(t, sp.add(runs[DefaultSpoolMax], "app"))
	require.Equal(t, runIDsOf(runs[1:]), spooledIDs(sp), "past the bound: the oldest dropped")
	require.Contains(t, logs.String(), "offline spool full: the oldest offline run is dropped unreported")
	require.Contains(t, logs.String(), "run_id="+runs[0].RunID)
	require.Equal(t, 1, strings.Count(logs.String(), "offline spool full"))
}

// On disk: the dropped run's file goes too, and a spool reopened with a
// smaller bound drops its oldest runs at once.
func TestSpoolBoundOnDisk(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "offline")
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	sp, err := openSpool(dir, 3, log)
	require.NoError(t, err)
	runs := offlineRuns(4)
	for _, r := range runs[:3] {
		require.NoError(t, sp.add(r, "app"))
	}
	require.Equal(t, runIDsOf(runs[:3]), spoolFiles(t, dir))
	require.Empty(t, logs.String())

	require.NoError(t, sp.add(runs[3], "app"))
	require.Equal(t, runIDsOf(runs[1:]), spoolFiles(t, dir))
	require.Contains(t, logs.String(), "run_id="+runs[0].RunID)

	// A restarted worker reads its spool back, oldest first.
	again, err := openSpool(dir, 3, log)
	require.NoError(t, err)
	require.Equal(t, runIDsOf(runs[1:]), spooledIDs(again))
	require.Equal(t, runs[1].Outcomes, again.pending()[0].Run.Outcomes)

	smaller, err := openSpool(dir, 2, log)
	require.NoError(t, err)
	require.Equal(t, runIDsOf(runs[2:]), spooledIDs(smaller))
	require.Equal(t, runIDsOf(runs[2:]), spoolFiles(t, dir))
	require.Contains(t, logs.String(), "run_id="+runs[1].RunID)

	// Reported: forgotten, file and all.
	smaller.done(runs[2].RunID)
	require.Equal(t, runIDsOf(runs[3:]), spoolFiles(t, dir))
}
