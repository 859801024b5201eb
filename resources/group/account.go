package group

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxName is the longest user or group name accepted, in bytes: the size
// of a name in utmp and what shadow's tools accept on most systems.
const MaxName = 32

// MaxID is the largest uid or gid accepted. 4294967295 is (uid_t)-1,
// which the system calls read as "no change".
const MaxID = 4294967294

// namePattern is the POSIX portable filename character set, not starting
// with '-' (an option) or '.'.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// CheckName checks a user or group name without touching the system: 1 to
// MaxName bytes of letters, digits, '_', '.' and '-', not starting with
// '-' or '.', and not all digits (a numeric name reads as an ID). Shell
// metacharacters, spaces, ':' and newlines (the database's separators)
// are all refused. The error wraps ErrInvalidName.
func CheckName(name string) error {
	switch {
	case name == "" || len(name) > MaxName:
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidName, len(name), MaxName)
	case !namePattern.MatchString(name):
		return fmt.Errorf("%w: only letters, digits and _ . - are allowed, not first - or .", ErrInvalidName)
	case isDigits(name):
		return fmt.Errorf("%w: all digits, it would read as a numeric id", ErrInvalidName)
	}
	return nil
}

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// ID is a numeric user or group id as a manifest writes it: a number
// (1001) or a string of digits ("1001"); the user type's gid also takes a
// group name. It keeps the text as written, empty when unset, so that a
// bad value ("abc", -1, 1.5, true) is reported by Validate with the
// property's name rather than by decoding.
type ID string

// UnmarshalJSON takes any JSON scalar: a string as its text, anything
// else as its literal; null leaves the ID unset.
func (id *ID) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*id = ID(s)
	default:
		*id = ID(b)
	}
	return nil
}

// Number parses the ID as a whole number from 0 to MaxID. The error wraps
// ErrInvalidID.
func (id ID) Number() (uint32, error) {
	s := string(id)
	if !isDigits(s) {
		return 0, fmt.Errorf("%w: %q is not a whole number", ErrInvalidID, s)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > MaxID {
		return 0, fmt.Errorf("%w: %s is out of range 0 to %d", ErrInvalidID, s, uint64(MaxID))
	}
	return uint32(n), nil
}

// IsNumber reports whether the ID is written with digits only (a gid
// rather than a group name).
func (id ID) IsNumber() bool { return isDigits(string(id)) }

// CheckField checks a free-text field of the account database (a home,
// a shell, a comment): no ':' (the field separator), no newline or other
// control character, at most max bytes.
func CheckField(v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%d bytes, limit %d", len(v), max)
	}
	if i := strings.IndexFunc(v, func(r rune) bool { return r == ':' || r < 0x20 || r == 0x7f }); i >= 0 {
		return fmt.Errorf("%q at byte %d: ':' and control characters are not allowed", v[i], i)
	}
	return nil
}
