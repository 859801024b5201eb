// Package ids resolves owner and group properties (names or numeric ids)
// to numeric ids, as file, document and archive resources need them.
//
// Name lookups go through the system's user and group databases (NSS), a
// cgo call each (a static build reads /etc/passwd and /etc/group and asks
// getent(1) for names they do not hold: nss.go); a run of thousands of files owned by one user asks the
// same question thousands of times. Answers are kept while /etc/passwd
// (for users) or /etc/group (for groups) is unchanged: a user or group
// resource that adds or changes an account rewrites that file, and the
// next lookup asks again.
//
// Knowing the file unchanged costs a stat(2) of it per lookup. Within a
// Snapshot (WithSnapshot), where the caller knows nothing rewrites the
// databases (a batch's checks, which apply nothing), each file is stat'ed
// once: UIDIn and GIDIn then answer from memory.
package ids

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
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

// UIDIn is UID under ctx's Snapshot, if any (WithSnapshot).
func UIDIn(ctx context.Context, s string) (int, error) {
	return users.resolveIn(snapshotOf(ctx).of(users), s, "owner")
}

// GIDIn is GID under ctx's Snapshot, if any (WithSnapshot).
func GIDIn(ctx context.Context, s string) (int, error) {
	return groups.resolveIn(snapshotOf(ctx).of(groups), s, "group")
}

// Snapshot holds the versions of /etc/passwd and /etc/group seen by the
// first lookup made under it: later lookups under it take the files as
// unchanged without a stat. Use one only over a span of work that changes
// no account (checks that apply nothing); a lookup outside it stats again.
// A Snapshot is safe for concurrent use.
type Snapshot struct {
	mu    sync.Mutex
	taken map[*cache]stamp
	ok    map[*cache]bool
}

// NewSnapshot returns an empty Snapshot: the first lookup of each database
// under it stats the file.
func NewSnapshot() *Snapshot { return &Snapshot{} }

type snapshotKey struct{}

// WithSnapshot returns ctx carrying s: UIDIn and GIDIn under it stat each
// database file at most once.
func WithSnapshot(ctx context.Context, s *Snapshot) context.Context {
	return context.WithValue(ctx, snapshotKey{}, s)
}

func snapshotOf(ctx context.Context) *Snapshot {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(snapshotKey{}).(*Snapshot)
	return s
}

// stamper gives a database file's stamp: the snapshot's, taken once.
type stamper struct {
	s *Snapshot
	c *cache
}

func (s *Snapshot) of(c *cache) stamper { return stamper{s: s, c: c} }

func (p stamper) stamp() (stamp, bool) {
	if p.s == nil {
		return stampOf(*p.c.file)
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if st, ok := p.s.taken[p.c]; ok {
		return st, p.s.ok[p.c]
	}
	st, ok := stampOf(*p.c.file)
	if p.s.taken == nil {
		p.s.taken, p.s.ok = map[*cache]stamp{}, map[*cache]bool{}
	}
	p.s.taken[p.c], p.s.ok[p.c] = st, ok
	return st, ok
}

var (
	users = &cache{file: &passwdFile, lookup: withNSS("passwd", func(n string) (string, error) {
		u, err := user.Lookup(n)
		if err != nil {
			return "", err
		}
		return u.Uid, nil
	})}
	groups = &cache{file: &groupFile, lookup: withNSS("group", func(n string) (string, error) {
		g, err := user.LookupGroup(n)
		if err != nil {
			return "", err
		}
		return g.Gid, nil
	})}
)

// stamp identifies a version of a database file.
type stamp struct {
	ino, size int64
	mtime     time.Time
}

// statCalls counts stampOf's stats.
var statCalls atomic.Int64

// Stats returns how many times this process stat'ed /etc/passwd or
// /etc/group to learn whether the cached answers still hold (a counter for
// tests and profiles).
func Stats() int64 { return statCalls.Load() }

func stampOf(path string) (stamp, bool) {
	statCalls.Add(1)
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
	// missing holds names the database did not know, with their error,
	// for missTTL: a noop run of thousands of files owned by an account
	// that the run would create asks once (a static build's getent is a
	// process each), and an account added elsewhere (NSS) is seen soon.
	missing map[string]miss
}

// miss is an unknown name's answer and until when it holds.
type miss struct {
	err   error
	until time.Time
}

// missTTL is how long an unknown name stays unknown without asking again
// while the database file is unchanged.
const missTTL = 10 * time.Second

func (c *cache) resolve(s, what string) (int, error) {
	return c.resolveIn(stamper{c: c}, s, what)
}

// numeric reports whether s is a decimal number, signed or not (what
// strconv.Atoi reads): a
// name is looked up without first failing strconv.Atoi (an error value
// made per lookup).
func numeric(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// resolveIn is resolve with the database's stamp from p.
func (c *cache) resolveIn(p stamper, s, what string) (int, error) {
	if numeric(s) {
		id, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", what, s, err)
		}
		if id < 0 {
			return 0, fmt.Errorf("%s %q: negative id", what, s)
		}
		return id, nil
	}
	st, stable := p.stamp()
	c.mu.Lock()
	if !stable || st != c.stamp {
		c.ids, c.missing, c.stamp = nil, nil, st
	}
	id, ok := c.ids[s]
	m, missed := c.missing[s]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	if missed && time.Now().Before(m.until) {
		return 0, fmt.Errorf("%s %q: %w", what, s, m.err)
	}
	idStr, err := c.lookup(s)
	if err != nil {
		if stable && unknownName(err) {
			c.mu.Lock()
			if c.stamp == st {
				if c.missing == nil {
					c.missing = map[string]miss{}
				}
				c.missing[s] = miss{err: err, until: time.Now().Add(missTTL)}
			}
			c.mu.Unlock()
		}
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
