package ids

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"os/user"
	"strings"
	"time"
)

// The release build is static (CGO_ENABLED=0, deploy/Dockerfile): its
// os/user reads /etc/passwd and /etc/group and nothing else, so an account
// that NSS serves from elsewhere (LDAP, sssd, systemd-homed, extrausers)
// is unknown to it. Such a build asks getent(1), which goes through NSS,
// for a name the files do not hold (nssFallback, set by the build in
// nss_cgo.go or nss_nocgo.go). A build with cgo asks NSS itself and never
// runs getent.

// getentCommand is the program asked; tests point it elsewhere.
var getentCommand = "getent"

// getentTimeout bounds one getent call (a remote directory that does not
// answer): past it the name is unknown, as when getent is missing.
const getentTimeout = 5 * time.Second

// getentID returns the id (the third field) of name in db ("passwd" or
// "group") as getent prints it; false when getent does not know the name,
// is missing, or fails.
func getentID(db, name string) (string, bool) {
	if name == "" || strings.ContainsAny(name, ":\n") {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, getentCommand, db, "--", name).Output()
	if err != nil {
		return "", false
	}
	line, _, _ := bytes.Cut(out, []byte("\n"))
	f := strings.Split(string(line), ":")
	if len(f) < 3 || f[0] != name || !numeric(f[2]) {
		return "", false
	}
	return f[2], true
}

// withNSS wraps a lookup of db: when this build does not ask NSS itself
// and the files do not hold the name, getent is asked.
func withNSS(db string, lookup func(string) (string, error)) func(string) (string, error) {
	return func(name string) (string, error) {
		id, err := lookup(name)
		if err == nil || !nssFallback || !unknownName(err) {
			return id, err
		}
		if id, ok := getentID(db, name); ok {
			return id, nil
		}
		return "", err
	}
}

// unknownName reports whether err says the name is not in the database.
func unknownName(err error) bool {
	var u user.UnknownUserError
	var g user.UnknownGroupError
	return errors.As(err, &u) || errors.As(err, &g)
}
