package coordinator

import (
	"fmt"
	"path"
	"slices"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// assumptions index what the resources of a noop run would create:
// directories (file, ensure: directory), users, groups and packages, each
// per target pool (a resource of another pool runs on other hosts). A noop
// task carries the entries its resource's check needs (bus.Assume), so that
// a dry run on a new host reports "would create" for a file in a directory
// the run would create, rather than failing it.
//
// The index is static: a declared resource counts as one that would create
// its thing whatever its own noop outcome. That is sound: one that is
// stable means the thing exists already, and one that fails skips the
// resources that require it (automatic edges join a file to its parent
// directory, owner and group, a service to its package).
type assumptions struct {
	dirs                map[assumeKey]string // → mode
	users, groups, pkgs map[assumeKey]bool
}

type assumeKey struct{ target, name string }

func newAssumptions(m *schemas.Manifest) *assumptions {
	a := &assumptions{dirs: map[assumeKey]string{}, users: map[assumeKey]bool{}, groups: map[assumeKey]bool{}, pkgs: map[assumeKey]bool{}}
	for _, r := range m.Resources {
		if r.Ensure == "absent" || template.HasTemplate(r.Name) {
			continue
		}
		k := assumeKey{r.Target, r.Name}
		switch r.Type {
		case "file":
			if r.Ensure == "directory" && path.IsAbs(r.Name) {
				k.name = path.Clean(r.Name)
				a.dirs[k] = modeString(r.Properties["mode"])
			}
		case "user":
			a.users[k] = true
		case "group":
			a.groups[k] = true
		case "package":
			a.pkgs[k] = true
		}
	}
	return a
}

func modeString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// of returns what r's check may assume, nil for nothing: the directories
// above r's path (file, archive's extract_parent, exec's cwd) that the run
// would create, its owner and group (file, archive), its gid and groups
// (user), its package (service).
func (a *assumptions) of(r *schemas.Resource) *bus.Assume {
	out := &bus.Assume{}
	str := func(prop string) string {
		s, _ := r.Properties[prop].(string)
		if template.HasTemplate(s) {
			return ""
		}
		return s
	}
	dirs := func(p string, self bool) {
		if !path.IsAbs(p) || template.HasTemplate(p) {
			return
		}
		p = path.Clean(p)
		if !self {
			p = path.Dir(p)
		}
		for ; ; p = path.Dir(p) {
			if mode, ok := a.dirs[assumeKey{r.Target, p}]; ok {
				if out.Directories == nil {
					out.Directories = map[string]string{}
				}
				out.Directories[p] = mode
			}
			if p == "/" {
				return
			}
		}
	}
	account := func(set map[assumeKey]bool, name string, into *[]string) {
		if name != "" && set[assumeKey{r.Target, name}] && !slices.Contains(*into, name) {
			*into = append(*into, name)
		}
	}
	switch r.Type {
	case "file":
		if r.Name != "/" {
			dirs(r.Name, false)
		}
		account(a.users, str("owner"), &out.Users)
		account(a.groups, str("group"), &out.Groups)
	case "archive":
		dirs(str("extract_parent"), true)
		account(a.users, str("owner"), &out.Users)
		account(a.groups, str("group"), &out.Groups)
	case "exec":
		dirs(str("cwd"), true)
	case "user":
		account(a.groups, str("gid"), &out.Groups)
		if groups, ok := r.Properties["groups"].([]any); ok {
			for _, g := range groups {
				s, _ := g.(string)
				account(a.groups, s, &out.Groups)
			}
		}
	case "service":
		account(a.pkgs, r.Name, &out.Packages)
	}
	if out.Empty() {
		return nil
	}
	return out
}
