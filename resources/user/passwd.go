package user

import (
	"fmt"
	"strconv"

	"github.com/manifold-run/manifold/resources/group"
)

// DefaultPasswdFile is the user database the user type reads.
const DefaultPasswdFile = "/etc/passwd"

// Account is one line of the passwd database.
type Account struct {
	Name    string
	UID     uint32
	GID     uint32
	Comment string
	Home    string
	Shell   string
}

// ReadPasswd reads a user database in /etc/passwd's format
// (name:password:uid:gid:comment:home:shell). Blank lines, comments and NIS
// entries are skipped; another malformed line is an error wrapping
// group.ErrMalformedDatabase naming the file and line.
func ReadPasswd(path string) ([]Account, error) {
	var out []Account
	err := group.ScanFile(path, 7, func(f []string) error {
		uid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return fmt.Errorf("uid %q is not a number", f[2])
		}
		gid, err := strconv.ParseUint(f[3], 10, 32)
		if err != nil {
			return fmt.Errorf("gid %q is not a number", f[3])
		}
		out = append(out, Account{Name: f[0], UID: uint32(uid), GID: uint32(gid), Comment: f[4], Home: f[5], Shell: f[6]})
		return nil
	})
	return out, err
}
