package ids

import (
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// getent is asked through NSS: root is 0 in both databases; a name it does
// not know, or one that could not be an account's, is not found.
func TestGetentID(t *testing.T) {
	if _, err := exec.LookPath("getent"); err != nil {
		t.Fatalf("getent(1) is needed (Debian: apt-get install libc-bin): %v", err)
	}
	id, ok := getentID("passwd", "root")
	require.True(t, ok)
	require.Equal(t, "0", id)
	id, ok = getentID("group", "root")
	require.True(t, ok)
	require.Equal(t, "0", id)
	_, ok = getentID("passwd", "no-such-user-manifold")
	require.False(t, ok)
	_, ok = getentID("passwd", "root:x")
	require.False(t, ok)
	_, ok = getentID("passwd", "")
	require.False(t, ok)
}

// A static build (os/user reading the files only) asks getent for a name
// the files lack, once while the file is unchanged whatever the answer; a
// cgo build never does. NSS sources other than the files (LDAP, sssd)
// cannot run here: getent is a script answering for one directory account.
func TestStaticBuildAsksGetentForNamesTheFilesLack(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "getent")
	log := filepath.Join(dir, "calls")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
echo "$*" >> `+log+`
if [ "$1 $2 $3" = "passwd -- ldapuser" ]; then echo 'ldapuser:*:4242:4242::/home/ldapuser:/bin/sh'; exit 0; fi
exit 2
`), 0o755))
	calls := func() int {
		b, err := os.ReadFile(log)
		if os.IsNotExist(err) {
			return 0
		}
		require.NoError(t, err)
		return bytes.Count(b, []byte("\n"))
	}
	oldCmd, oldFallback := getentCommand, nssFallback
	t.Cleanup(func() { getentCommand, nssFallback = oldCmd, oldFallback })
	getentCommand = script

	db := filepath.Join(dir, "passwd")
	require.NoError(t, os.WriteFile(db, []byte("root:x:0:0::/root:/bin/sh\n"), 0o644))
	files := func(n string) (string, error) {
		if n == "root" {
			return "0", nil
		}
		return "", user.UnknownUserError(n)
	}
	c := &cache{file: &db, lookup: withNSS("passwd", files)}

	nssFallback = true
	got, err := c.resolve("root", "owner")
	require.NoError(t, err)
	require.Equal(t, 0, got)
	require.Equal(t, 0, calls(), "a name the files hold is not asked of getent")

	got, err = c.resolve("ldapuser", "owner")
	require.NoError(t, err)
	require.Equal(t, 4242, got)
	require.Equal(t, 1, calls())

	for range 5 {
		_, err = c.resolve("nobody-anywhere", "owner")
		require.ErrorContains(t, err, `owner "nobody-anywhere": user: unknown user nobody-anywhere`)
	}
	require.Equal(t, 2, calls(), "an unknown name is asked once while the file is unchanged")

	// The file changed (an account added by a run): asked again.
	require.NoError(t, os.WriteFile(db, []byte("root:x:0:0::/root:/bin/sh\nweb:x:33:33::/:/bin/sh\n"), 0o644))
	require.NoError(t, os.Chtimes(db, time.Now().Add(time.Second), time.Now().Add(time.Second)))
	_, err = c.resolve("nobody-anywhere", "owner")
	require.Error(t, err)
	require.Equal(t, 3, calls())

	// A build with cgo asked NSS already: getent is never run.
	nssFallback = false
	c = &cache{file: &db, lookup: withNSS("passwd", files)}
	_, err = c.resolve("ldapuser", "owner")
	require.ErrorContains(t, err, `owner "ldapuser": user: unknown user ldapuser`)
	require.Equal(t, 3, calls())
}

// An unknown name is asked again once missTTL has passed, even while the
// file is unchanged: an account added to a directory is seen.
func TestUnknownNameAskedAgainAfterItsTTL(t *testing.T) {
	db := filepath.Join(t.TempDir(), "group")
	require.NoError(t, os.WriteFile(db, []byte("root:x:0:\n"), 0o644))
	calls, known := 0, false
	c := &cache{file: &db, lookup: func(n string) (string, error) {
		calls++
		if known {
			return "77", nil
		}
		return "", user.UnknownGroupError(n)
	}}
	_, err := c.resolve("ops", "group")
	require.ErrorContains(t, err, `group "ops": group: unknown group ops`)
	_, err = c.resolve("ops", "group")
	require.Error(t, err)
	require.Equal(t, 1, calls)

	known = true
	c.mu.Lock()
	m := c.missing["ops"]
	m.until = time.Now().Add(-time.Millisecond)
	c.missing["ops"] = m
	c.mu.Unlock()
	got, err := c.resolve("ops", "group")
	require.NoError(t, err)
	require.Equal(t, 77, got)
	require.Equal(t, 2, calls)
}
