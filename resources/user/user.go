package user

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/group"
	"github.com/manifold-run/manifold/resources/safefs"
)

// Type is the resource type name, as written in manifests.
const Type = "user"

const (
	// MaxGroups is the longest groups list accepted.
	MaxGroups = 1024
	// MaxPath is the longest home or shell accepted, in bytes (PATH_MAX
	// less its terminating NUL).
	MaxPath = 4095
	// MaxComment is the longest comment accepted, in bytes.
	MaxComment = 255
)

// Ensure is the desired state of a user.
type Ensure string

const (
	// EnsurePresent wants the account to exist (the default).
	EnsurePresent Ensure = "present"
	// EnsureAbsent wants it removed.
	EnsureAbsent Ensure = "absent"
)

// Properties are the user type's own properties. Unset ones are left to
// useradd's defaults on creation and unmanaged afterwards.
type Properties struct {
	// UID is the numeric user id.
	UID group.ID `json:"uid,omitempty"`
	// GID is the primary group, a name or a numeric gid. Unset, useradd's
	// default applies (on most distributions a group named as the user; a
	// group of that name that already exists is used).
	GID group.ID `json:"gid,omitempty"`
	// Groups are the supplementary groups, exactly: the user is added to
	// those missing and removed from any other. An empty list removes the
	// user from every supplementary group; unset leaves membership alone.
	Groups []string `json:"groups,omitempty"`
	// Home is the home directory, an absolute path.
	Home string `json:"home,omitempty"`
	// Shell is the login shell, an absolute path.
	Shell string `json:"shell,omitempty"`
	// Comment is the GECOS field (the full name); "" clears it.
	Comment *string `json:"comment,omitempty"`
	// System creates a system account (useradd -r: a uid from the system
	// range, no aging). It only matters on creation.
	System bool `json:"system,omitempty"`
	// ManageHome creates the home directory with the account (useradd -m),
	// moves its content when home changes (usermod -m) and removes it with
	// the account (userdel -r). Unset or false, home directories are never
	// created, moved or removed (useradd -M).
	ManageHome bool `json:"managehome,omitempty"`
}

// User is one user resource. Build it with New.
type User struct {
	name   string
	ensure Ensure
	props  Properties
	// passwdFile and groupFile are the databases read for the current
	// state.
	passwdFile, groupFile string
	// selfUID is the uid whose account is never removed or renumbered:
	// the worker's own (os.Getuid), replaced by tests.
	selfUID func() int
}

var (
	_ resources.Resource = (*User)(nil)
	_ resources.Factory  = New
)

// New is the user type's resources.Factory. An empty ensure means present.
// The groups list is sorted and duplicates dropped.
func New(spec resources.Spec) (resources.Resource, error) {
	u := &User{name: spec.Name, ensure: Ensure(spec.Ensure), passwdFile: DefaultPasswdFile, groupFile: group.DefaultFile, selfUID: os.Getuid}
	if err := resources.DecodeProperties(spec.Properties, &u.props); err != nil {
		return nil, err
	}
	if u.ensure == "" {
		u.ensure = EnsurePresent
	}
	if spec.Provider != "" {
		return nil, fmt.Errorf("provider %q: %w of %s (known: none, useradd is the only implementation)", spec.Provider, resources.ErrUnknownProvider, Type)
	}
	if u.props.Groups != nil {
		// An empty list stays non-nil: it manages membership (none).
		slices.Sort(u.props.Groups)
		u.props.Groups = slices.Compact(u.props.Groups)
	}
	return u, nil
}

// Validate checks the name, ensure and every property without touching
// the system. Errors name the property and wrap the package's or group's
// sentinels.
func (u *User) Validate() error {
	p := u.props
	if err := group.CheckName(u.name); err != nil {
		return fmt.Errorf("name %q: %w", u.name, err)
	}
	switch u.ensure {
	case EnsurePresent, EnsureAbsent:
	default:
		return fmt.Errorf("ensure %q: want present or absent", u.ensure)
	}
	if p.UID != "" {
		n, err := p.UID.Number()
		if err != nil {
			return fmt.Errorf("uid: %w", err)
		}
		if u.name == "root" && n != 0 {
			return fmt.Errorf("uid %d: %w: root keeps uid 0", n, ErrProtectedAccount)
		}
		if n == 0 && u.ensure == EnsureAbsent {
			return fmt.Errorf("ensure absent: %w: uid 0 (the superuser)", ErrProtectedAccount)
		}
	}
	if u.name == "root" && u.ensure == EnsureAbsent {
		return fmt.Errorf("ensure absent: %w: root (the superuser)", ErrProtectedAccount)
	}
	if p.GID != "" {
		if p.GID.IsNumber() {
			if _, err := p.GID.Number(); err != nil {
				return fmt.Errorf("gid: %w", err)
			}
		} else if err := group.CheckName(string(p.GID)); err != nil {
			return fmt.Errorf("gid %q: want a group name or a numeric gid: %w", p.GID, err)
		}
	}
	if len(p.Groups) > MaxGroups {
		return fmt.Errorf("groups: %w: %d, limit %d", ErrTooManyGroups, len(p.Groups), MaxGroups)
	}
	for _, g := range p.Groups {
		if err := group.CheckName(g); err != nil {
			return fmt.Errorf("groups: %q: %w", g, err)
		}
	}
	for _, f := range []struct{ name, value string }{{"home", p.Home}, {"shell", p.Shell}} {
		if f.value == "" {
			continue
		}
		if !filepath.IsAbs(f.value) {
			return fmt.Errorf("%s %q: %w: not absolute", f.name, f.value, ErrInvalidPath)
		}
		if err := group.CheckField(f.value, MaxPath); err != nil {
			return fmt.Errorf("%s: %w: %w", f.name, ErrInvalidPath, err)
		}
	}
	if p.Comment != nil {
		if err := group.CheckField(*p.Comment, MaxComment); err != nil {
			return fmt.Errorf("comment: %w: %w", ErrInvalidComment, err)
		}
	}
	return nil
}

// change is one property that differs from the account.
type change struct {
	field, want, have string
}

// CheckApply reads the account and its group memberships and, with apply,
// creates it (useradd), changes what differs (one usermod) or removes it
// (userdel). Groups the account should belong to must exist when it
// applies; in noop a missing group is only reported.
func (u *User) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	accounts, err := ReadPasswd(u.passwdFile)
	if err != nil {
		return resources.Result{}, err
	}
	groups, err := group.ReadFile(u.groupFile)
	if err != nil {
		return resources.Result{}, err
	}
	i := slices.IndexFunc(accounts, func(a Account) bool { return a.Name == u.name })
	exists := i >= 0

	var (
		argv []string
		res  resources.Result
		done string
	)
	switch {
	case u.ensure == EnsureAbsent && !exists:
		return resources.Result{Message: "absent"}, nil
	case u.ensure == EnsureAbsent:
		if err := u.protected(accounts[i], "remove"); err != nil {
			return resources.Result{}, err
		}
		if u.props.ManageHome {
			if err := checkHome(accounts[i].Home, "remove"); err != nil {
				return resources.Result{}, err
			}
		}
		argv = []string{"userdel"}
		res, done = resources.Result{Changed: true, Message: "remove"}, "removed"
		if u.props.ManageHome {
			argv = append(argv, "-r")
			res.Message, done = "remove with its home", "removed with its home"
		}
		argv = append(argv, u.name)
	case !exists:
		if u.props.ManageHome {
			if err := checkHome(cmp.Or(u.props.Home, filepath.Join("/home", u.name)), "create"); err != nil {
				return resources.Result{}, err
			}
		}
		argv = u.useradd(groups)
		res, done = resources.Result{Changed: true, Message: "create"}, "created"
	default:
		have := accounts[i]
		changes := u.diff(have, groups)
		if len(changes) == 0 {
			return resources.Result{Message: fmt.Sprintf("present, uid %d", have.UID)}, nil
		}
		if err := u.checkChanges(have, changes); err != nil {
			return resources.Result{}, err
		}
		argv = u.usermod(changes)
		res = resources.Result{Changed: true, Message: describe(changes, "is")}
		for _, c := range changes {
			res.Diff += fmt.Sprintf("-%s: %s\n+%s: %s\n", c.field, c.have, c.field, c.want)
		}
		done = describe(changes, "was")
	}
	if !apply {
		return res, nil
	}
	if u.ensure == EnsurePresent {
		if err := u.groupsExist(groups); err != nil {
			return resources.Result{}, fmt.Errorf("%s: %w", res.Message, err)
		}
	}
	if err := group.Run(ctx, env, argv...); err != nil {
		return resources.Result{}, fmt.Errorf("%s: %w", res.Message, err)
	}
	res.Message = done
	return res, nil
}

// protected refuses to remove or renumber (what) root, any account of uid
// 0, and the account the worker runs as.
func (u *User) protected(a Account, what string) error {
	switch {
	case a.UID == 0:
		return fmt.Errorf("%s %s: %w: uid 0 (the superuser)", what, a.Name, ErrProtectedAccount)
	case int64(a.UID) == int64(u.selfUID()):
		return fmt.Errorf("%s %s: %w: uid %d is the account this worker runs as", what, a.Name, ErrProtectedAccount, a.UID)
	}
	return nil
}

// checkChanges refuses a uid change of a protected account, and checks
// the homes usermod re-owns (uid) or moves (home with managehome).
func (u *User) checkChanges(have Account, changes []change) error {
	for _, c := range changes {
		switch {
		case c.field == "uid":
			if err := u.protected(have, "renumber"); err != nil {
				return err
			}
			if err := checkHome(have.Home, "re-own"); err != nil {
				return err
			}
		case c.field == "home" && u.props.ManageHome:
			if err := checkHome(have.Home, "move"); err != nil {
				return err
			}
			if err := checkHome(u.props.Home, "move into"); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkHome fails with ErrLinkedHome when home is the root directory or a
// symbolic link, which useradd -m, usermod -m and -u, and userdel -r would
// act through. The directories on the way are opened by descriptor
// (safefs): a link there is followed only when root or the worker owns it.
// A missing home (or parent) is fine.
func checkHome(home, what string) error {
	if home == "" {
		return nil
	}
	if filepath.Clean(home) == "/" {
		return fmt.Errorf("%s home %s: %w: it is the root directory", what, home, ErrLinkedHome)
	}
	parent, name, err := safefs.OpenParent(home)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s home %s: %w: %w", what, home, ErrLinkedHome, err)
	}
	defer parent.Close()
	fi, err := parent.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s home: %w", what, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := parent.Readlink(name)
		return fmt.Errorf("%s home %s: it is a symlink to %s: %w", what, home, target, ErrLinkedHome)
	}
	return nil
}

// useradd returns the command creating the account.
func (u *User) useradd(groups group.Database) []string {
	p := u.props
	argv := []string{"useradd"}
	if p.UID != "" {
		argv = append(argv, "-u", string(p.UID))
	}
	switch {
	case p.GID != "":
		argv = append(argv, "-g", string(p.GID))
	default:
		// useradd refuses to create the user's own group when one of
		// that name exists: make it the primary group instead.
		if _, ok := groups.ByName(u.name); ok {
			argv = append(argv, "-g", u.name)
		}
	}
	if len(p.Groups) > 0 {
		argv = append(argv, "-G", strings.Join(p.Groups, ","))
	}
	if p.Home != "" {
		argv = append(argv, "-d", p.Home)
	}
	if p.Shell != "" {
		argv = append(argv, "-s", p.Shell)
	}
	if p.Comment != nil {
		argv = append(argv, "-c", *p.Comment)
	}
	if p.System {
		argv = append(argv, "-r")
	}
	if p.ManageHome {
		argv = append(argv, "-m")
	} else {
		argv = append(argv, "-M")
	}
	return append(argv, u.name)
}

// diff lists the managed properties that differ from the account, in the
// order usermod takes them.
func (u *User) diff(have Account, groups group.Database) []change {
	p := u.props
	var out []change
	if p.UID != "" {
		if want, _ := p.UID.Number(); want != have.UID {
			out = append(out, change{"uid", string(p.UID), strconv.FormatUint(uint64(have.UID), 10)})
		}
	}
	if p.GID != "" && !sameGroup(p.GID, have.GID, groups) {
		out = append(out, change{"gid", string(p.GID), strconv.FormatUint(uint64(have.GID), 10)})
	}
	if p.Groups != nil {
		member := groups.MemberOf(u.name)
		slices.Sort(member)
		member = slices.Compact(member)
		if !slices.Equal(member, p.Groups) {
			out = append(out, change{"groups", listString(p.Groups), listString(member)})
		}
	}
	if p.Home != "" && p.Home != have.Home {
		out = append(out, change{"home", p.Home, have.Home})
	}
	if p.Shell != "" && p.Shell != have.Shell {
		out = append(out, change{"shell", p.Shell, have.Shell})
	}
	if p.Comment != nil && *p.Comment != have.Comment {
		out = append(out, change{"comment", strconv.Quote(*p.Comment), strconv.Quote(have.Comment)})
	}
	return out
}

// usermod returns the command making the changes.
func (u *User) usermod(changes []change) []string {
	p := u.props
	argv := []string{"usermod"}
	for _, c := range changes {
		switch c.field {
		case "uid":
			argv = append(argv, "-u", string(p.UID))
		case "gid":
			argv = append(argv, "-g", string(p.GID))
		case "groups":
			argv = append(argv, "-G", strings.Join(p.Groups, ","))
		case "home":
			argv = append(argv, "-d", p.Home)
			if p.ManageHome {
				argv = append(argv, "-m")
			}
		case "shell":
			argv = append(argv, "-s", p.Shell)
		case "comment":
			argv = append(argv, "-c", *p.Comment)
		}
	}
	return append(argv, u.name)
}

// groupsExist returns an error wrapping group.ErrNotFound for the first
// group the account should be in that the database lacks.
func (u *User) groupsExist(groups group.Database) error {
	if gid := u.props.GID; gid != "" {
		var ok bool
		if gid.IsNumber() {
			n, _ := gid.Number()
			_, ok = groups.ByGID(n)
		} else {
			_, ok = groups.ByName(string(gid))
		}
		if !ok {
			return fmt.Errorf("gid %q: %w in %s", gid, group.ErrNotFound, u.groupFile)
		}
	}
	for _, g := range u.props.Groups {
		if _, ok := groups.ByName(g); !ok {
			return fmt.Errorf("groups: %q: %w in %s", g, group.ErrNotFound, u.groupFile)
		}
	}
	return nil
}

// sameGroup reports whether want (a gid or a group name) is gid. A name
// the database lacks is not.
func sameGroup(want group.ID, gid uint32, groups group.Database) bool {
	if want.IsNumber() {
		n, _ := want.Number()
		return n == gid
	}
	e, ok := groups.ByName(string(want))
	return ok && e.GID == gid
}

func listString(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ",")
}

// describe words changes: "set shell /bin/sh (is /bin/bash), uid 1001 (is
// 1002)", with "was" once applied.
func describe(changes []change, tense string) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = fmt.Sprintf("%s %s (%s %s)", c.field, c.want, tense, c.have)
	}
	return "set " + strings.Join(parts, ", ")
}
