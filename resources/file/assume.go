package file

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
)

// wouldCreate is the noop check of a file whose parent directory does not
// exist but would be created by another resource of the run
// (env.Assumed): the file would be created, with a diff from nothing
// under the usual redaction rules (the directories the run would create
// count with the mode they would get).
func (f *File) wouldCreate(ctx context.Context, env *resources.Env) (resources.Result, error) {
	want, err := f.wantMetaIn(ctx, env)
	if err != nil {
		return resources.Result{}, err
	}
	if f.ensure() == EnsureDirectory {
		return resources.Result{Changed: true, Message: "create directory"}, nil
	}
	res := resources.Result{Changed: true, Message: "create"}
	var content []byte
	switch {
	case f.Content != nil:
		content = []byte(*f.Content)
	case f.Source != "":
		if content, err = readSource(env.Root, env.WorkDir, f.Source); err != nil {
			return resources.Result{}, fmt.Errorf("source %s: %w", f.Source, err)
		}
	default:
		return res, nil
	}
	newMode := want.perm(0o644)
	reachable := assumedReachable(env.Assumed(), filepath.Dir(f.Path))
	res.Diff = f.diffIn(f.Path, false, 0, nil, content, newMode, reachable)
	return res, nil
}

// assumedReachable reports whether an unprivileged user could reach
// directory dir once the run created it: every directory the run would
// create on the way world-searchable, and the nearest existing one
// reachable as safefs.ReachableByOthers says.
func assumedReachable(a *resources.Assumed, dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		mode, ok := a.Dir(d)
		if !ok {
			return safefs.ReachableByOthers(d)
		}
		if mode&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}
