package group

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// DefaultFile is the group database the group and user types read.
const DefaultFile = "/etc/group"

// Entry is one line of the group database.
type Entry struct {
	// Name is the group's name.
	Name string
	// GID is the group's numeric id.
	GID uint32
	// Members are the users listed as supplementary members.
	Members []string
}

// Database is the group database read at one moment.
type Database []Entry

// ByName returns the entry of the group named name.
func (db Database) ByName(name string) (Entry, bool) {
	for _, e := range db {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// ByGID returns the first entry with gid.
func (db Database) ByGID(gid uint32) (Entry, bool) {
	for _, e := range db {
		if e.GID == gid {
			return e, true
		}
	}
	return Entry{}, false
}

// MemberOf returns the names of the groups listing user as a member, in
// database order.
func (db Database) MemberOf(user string) []string {
	var out []string
	for _, e := range db {
		for _, m := range e.Members {
			if m == user {
				out = append(out, e.Name)
				break
			}
		}
	}
	return out
}

// ReadFile reads a group database in /etc/group's format
// (name:password:gid:member,member). Blank lines, comments and NIS
// compatibility entries ('+' or '-' first) are skipped; any other line
// without four fields or with a bad gid is an error wrapping
// ErrMalformedDatabase that names the file and line.
func ReadFile(path string) (Database, error) {
	var db Database
	err := ScanFile(path, 4, func(fields []string) error {
		gid, err := strconv.ParseUint(fields[2], 10, 32)
		if err != nil {
			return fmt.Errorf("gid %q is not a number", fields[2])
		}
		e := Entry{Name: fields[0], GID: uint32(gid)}
		for m := range strings.SplitSeq(fields[3], ",") {
			if m = strings.TrimSpace(m); m != "" {
				e.Members = append(e.Members, m)
			}
		}
		db = append(db, e)
		return nil
	})
	return db, err
}

// ScanFile calls fn with the ':'-separated fields of each entry of an
// account database file (/etc/group, /etc/passwd), which must have n
// fields. Blank lines, '#' comments and NIS entries ('+' or '-' first) are
// skipped. A line with another number of fields, or one fn refuses, is an
// error wrapping ErrMalformedDatabase naming path and line.
func ScanFile(path string, n int, fn func(fields []string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read account database: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for line := 1; ; line++ {
		text, err := r.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if t := strings.TrimRight(text, "\r\n"); t != "" && !strings.ContainsAny(t[:1], "#+-") {
			fields := strings.Split(t, ":")
			if len(fields) != n {
				return fmt.Errorf("%s:%d: %w: %d fields, want %d", path, line, ErrMalformedDatabase, len(fields), n)
			}
			if ferr := fn(fields); ferr != nil {
				return fmt.Errorf("%s:%d: %w: %w", path, line, ErrMalformedDatabase, ferr)
			}
		}
		if err != nil {
			return nil
		}
	}
}
