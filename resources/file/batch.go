package file

import (
	"context"
	"fmt"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
)

// BatchKey is the batch key of the files that may be executed together
// ("file"): consecutive ones of a segment form a batch, whose content
// writes ApplyBatch makes durable together.
const BatchKey = "file"

var _ resources.Batcher = (*File)(nil)

// commitGroup commits a group of ApplyBatch (tests count them).
var commitGroup = (*safefs.Group).Commit

// BatchKey returns BatchKey for a regular file at the path itself with
// content or attribute-only, and "" (executed alone) for the rest: a
// batch checks all its members before it applies any, so a member's
// check must not depend on another's change. Directories (a later file's
// parent), removals, sources (read from files an earlier resource may
// write) and followed links (to a target an earlier resource may make)
// are therefore executed alone, in their place.
func (f *File) BatchKey(context.Context, *resources.Env) (string, error) {
	if f.ensure() != EnsurePresent || f.Source != "" || f.follow() {
		return "", nil
	}
	return BatchKey, nil
}

// ConcurrentCheck: a batch member's check (a present file at its path,
// content or attributes) reads the host and changes nothing; what it
// shares with other files' checks, the segment's directories
// (safefs.Dirs), the account-name caches (ids) and the diff's reach
// verdicts (safefs.Reach), is safe for concurrent use. So a batch's
// checks may run side by side (resources.Precheck).
func (f *File) ConcurrentCheck() bool { return true }

// groupable reports whether f's write can wait for the group's commit: a
// file with content. An attribute-only member is applied at once, after
// the writes staged before it were committed, so changes land in order.
func (f *File) groupable() bool { return f.Content != nil }

// ApplyBatch applies members (files, each found changed by its check), in
// order, as CheckApply with apply true would, with the fsyncs of their
// content writes grouped: each write's temporary file is created,
// written, chowned and chmodded (safefs.Group.Add), then, once for up to
// safefs.MaxGroupFiles files, all are made durable together, renamed
// over their targets and their directories fsynced once each
// (safefs.Group.Commit). Each file stays atomic (old or new content after
// a crash, never a mix) and is reported changed only once renamed and
// durable. The parent directories are opened once per batch (the
// safefs.Dirs of ctx, or one of its own).
//
// An error (a write that failed, a check that changed its mind) ends the
// batch: the writes staged and not committed are removed and the error is
// returned, after which the engine applies each member alone, which names
// the failing file and its cause.
func (f *File) ApplyBatch(ctx context.Context, env *resources.Env, members []resources.Batcher) ([]resources.Result, error) {
	if safefs.DirsFrom(ctx) == nil {
		dirs := safefs.NewDirs()
		defer dirs.Close()
		ctx = safefs.WithDirs(ctx, dirs)
	}
	results := make([]resources.Result, len(members))
	var (
		g      safefs.Group
		staged []string // the paths of g's writes, in order
	)
	commit := func() error {
		if g.Len() == 0 {
			return nil
		}
		errs := commitGroup(&g)
		paths := staged
		staged = nil
		for k, err := range errs {
			if err != nil {
				return fmt.Errorf("%s: %w", paths[k], err)
			}
		}
		return nil
	}
	for i, m := range members {
		mf, ok := m.(*File)
		if !ok {
			g.Abort()
			return nil, fmt.Errorf("file batch: member %d is a %T, not a file", i, m)
		}
		var stage *safefs.Group
		if mf.groupable() {
			stage = &g
		}
		if stage == nil || g.Len() >= safefs.MaxGroupFiles {
			if err := commit(); err != nil {
				return nil, err
			}
		}
		before := g.Len()
		r, err := mf.checkApply(ctx, env, true, stage)
		if err != nil {
			g.Abort()
			return nil, fmt.Errorf("%s: %w", mf.Path, err)
		}
		if g.Len() > before {
			staged = append(staged, mf.Path)
		}
		results[i] = r
	}
	if err := commit(); err != nil {
		return nil, err
	}
	return results, nil
}
