package ids

import (
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
