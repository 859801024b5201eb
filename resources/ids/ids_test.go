package ids

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Names are looked up once while the database file is unchanged, and again
// once it changed (an account added or renumbered by a run).
func TestAnswersKeptWhileTheDatabaseIsUnchanged(t *testing.T) {
	db := filepath.Join(t.TempDir(), "passwd")
	require.NoError(t, os.WriteFile(db, []byte("app:x:1000\n"), 0o644))
	calls, id := 0, "1000"
	c := &cache{file: &db, lookup: func(string) (string, error) { calls++; return id, nil }}

	for range 3 {
		got, err := c.resolve("app", "owner")
		require.NoError(t, err)
		require.Equal(t, 1000, got)
	}
	require.Equal(t, 1, calls)

	id = "1001"
	require.NoError(t, os.WriteFile(db, []byte("app:x:1001\nother:x:1002\n"), 0o644))
	require.NoError(t, os.Chtimes(db, time.Now().Add(time.Second), time.Now().Add(time.Second)))
	got, err := c.resolve("app", "owner")
	require.NoError(t, err)
	require.Equal(t, 1001, got)
	require.Equal(t, 2, calls)

	// Numeric ids are taken as they are; negative ones are refused.
	got, err = c.resolve("42", "owner")
	require.NoError(t, err)
	require.Equal(t, 42, got)
	_, err = c.resolve("-1", "owner")
	require.ErrorContains(t, err, `owner "-1": negative id`)
}

// The real databases: root is 0 in both, and an unknown name is an error
// naming the property.
func TestRealDatabases(t *testing.T) {
	uid, err := UID("root")
	require.NoError(t, err)
	require.Equal(t, 0, uid)
	gid, err := GID("root")
	require.NoError(t, err)
	require.Equal(t, 0, gid)
	_, err = UID("no-such-user-manifold")
	require.ErrorContains(t, err, `owner "no-such-user-manifold"`)
	_, err = GID("no-such-group-manifold")
	require.ErrorContains(t, err, `group "no-such-group-manifold"`)
}

// Under a Snapshot each database file is stat'ed once, however many
// lookups: the per-lookup stat is what a batch of 20,000 files paid twice
// each. A change made while the snapshot is held is seen by lookups
// outside it (and by the next snapshot).
func TestSnapshotStatsOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "passwd")
	require.NoError(t, os.WriteFile(db, []byte("app:x:1000\n"), 0o644))
	calls, id := 0, "1000"
	c := &cache{file: &db, lookup: func(string) (string, error) { calls++; return id, nil }}

	snap := NewSnapshot()
	before := statCalls.Load()
	for range 1000 {
		got, err := c.resolveIn(snap.of(c), "app", "owner")
		require.NoError(t, err)
		require.Equal(t, 1000, got)
	}
	require.Equal(t, int64(1), statCalls.Load()-before, "stats under one snapshot")
	require.Equal(t, 1, calls)

	id = "1001"
	require.NoError(t, os.WriteFile(db, []byte("app:x:1001\nother:x:1002\n"), 0o644))
	require.NoError(t, os.Chtimes(db, time.Now().Add(time.Second), time.Now().Add(time.Second)))
	got, err := c.resolveIn(snap.of(c), "app", "owner")
	require.NoError(t, err)
	require.Equal(t, 1000, got, "the snapshot takes the file as it first saw it")

	got, err = c.resolve("app", "owner")
	require.NoError(t, err)
	require.Equal(t, 1001, got, "outside the snapshot the change is seen")
	got, err = c.resolveIn(NewSnapshot().of(c), "app", "owner")
	require.NoError(t, err)
	require.Equal(t, 1001, got, "a new snapshot sees the change")

	// Through the context, on the real databases: one stat per database.
	ctx := WithSnapshot(context.Background(), NewSnapshot())
	before = statCalls.Load()
	for range 100 {
		uid, err := UIDIn(ctx, "root")
		require.NoError(t, err)
		require.Equal(t, 0, uid)
		gid, err := GIDIn(ctx, "root")
		require.NoError(t, err)
		require.Equal(t, 0, gid)
	}
	require.Equal(t, int64(2), statCalls.Load()-before)
	// Without a snapshot in ctx, each lookup stats.
	before = statCalls.Load()
	_, err = UIDIn(context.Background(), "root")
	require.NoError(t, err)
	_, err = UIDIn(context.Background(), "root")
	require.NoError(t, err)
	require.Equal(t, int64(2), statCalls.Load()-before)
	_, err = UIDIn(ctx, "no-such-user-manifold")
	require.ErrorContains(t, err, `owner "no-such-user-manifold"`)
}

// A name is looked up without a failed number parse (no error value made
// per lookup): a lookup of a cached name allocates nothing; numbers, signed
// or not, are taken as they are.
func TestNameLookupAllocatesNothing(t *testing.T) {
	ctx := WithSnapshot(context.Background(), NewSnapshot())
	_, err := UIDIn(ctx, "root")
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() { _, _ = UIDIn(ctx, "root") })
	require.Zero(t, allocs)
	for in, want := range map[string]int{"0": 0, "+7": 7, "1000": 1000} {
		got, err := UID(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err = UID("-3")
	require.ErrorContains(t, err, `owner "-3": negative id`)
	_, err = UID("99999999999999999999999")
	require.ErrorContains(t, err, `owner "99999999999999999999999"`)
}
