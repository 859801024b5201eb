// Package ids resolves owner and group properties (names or numeric ids)
// to numeric ids, as file, document and archive resources need them.
//
// Name lookups go through the system's user and group databases (NSS), a
// cgo call each; a run of thousands of files owned by one user asks the
// same question thousands of times. Answers are kept while /etc/passwd
// (for users) or /etc/group (for groups) is unchanged: a user or group
// resource that adds or changes an account rewrites that file, and the
// next lookup asks again.
package ids

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Files whose changes invalidate the cached answers.
var (
	passwdFile = "/etc/passwd"
	groupFile  = "/etc/group"
)

// UID resolves an owner: a numeric id as is, a name through the user
// database. The error names the property ("owner").
func UID(s string) (int, error) { return users.resolve(s, "owner") }

// GID resolves a group: a numeric id as is, a name through the group
// database. The error names the property ("group").
func GID(s string) (int, error) { return groups.resolve(s, "group") }

var (
	users = &cache{file: &passwdFile, lookup: func(n string) (string, error) {
		u, err := user.Lookup(n)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	}}
	groups = &cache{file: &groupFile, lookup: func(n string) (string, error) {
		g, err := user.LookupGroup(n)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	}}
)

// stamp identifies a version of a database file.
type stamp struct {
	ino, size int64
	mtime     time.Time
}

func stampOf(path string) (stamp, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, false
	}
	s := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = int64(st.Ino)
	}
	return s, true
}

// cache keeps the ids found by name while its database file is unchanged.
type cache struct {
	file   *string
	lookup func(string) (string, error)

	mu    sync.Mutex
	stamp stamp
	ids   map[string]int
}

func (c *cache) resolve(s, what string) (int, error) {
	if id, err := strconv.Atoi(s); err == nil {
		if id < 0 {
			return 0, fmt.Errorf("%s %q: negative id", what, s)
		}
		return id, nil
	}
	st, stable := stampOf(*c.file)
	c.mu.Lock()
	if !stable || st != c.stamp {
		c.ids, c.stamp = nil, st
	}
	id, ok := c.ids[s]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	idStr, err := c.lookup(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", what, s, err)
	}
	if id, err = strconv.Atoi(idStr); err != nil {
		return 0, fmt.Errorf("%s %q: non-numeric id %q", what, s, idStr)
	}
	if stable {
		c.mu.Lock()
		if c.stamp == st {
			if c.ids == nil {
				c.ids = map[string]int{}
			}
			c.ids[s] = id
		}
		c.mu.Unlock()
	}
	return id, nil
}
