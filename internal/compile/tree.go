package compile

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// Tree is a compiled entry manifest with the manifests it applies.
type Tree struct {
	// Bundle holds the entry manifest and what it references: the child
	// manifests of apply resources (recursively) and the relative `source`
	// files of file resources, rooted at the entry's directory.
	Bundle *bundle.Bundle
	// Entry is the entry manifest's path inside the bundle.
	Entry string
	// Plan is the entry manifest's plan.
	Plan *Plan
	// Manifests is how many manifests were compiled (the entry included).
	Manifests int
}

// Build compiles the manifest file at entry and, recursively, the child
// manifests its apply resources name, each with the data it will get (its
// own, its hierarchy for o.Facts, its apply resource's, the run's), and
// collects them and the file sources they name into a bundle. So a child
// that does not validate fails before anything runs. A child applied
// twice is compiled once, with the data of its first apply; a cycle is
// left to the depth limit at run time. A compilation error is returned as
// schemas.Errors; a missing or escaping file names the resource that
// references it.
func Build(entry string, o Opts) (*Tree, error) {
	root, err := filepath.Abs(filepath.Dir(entry))
	if err != nil {
		return nil, err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	c := &collector{root: root, realRoot: realRoot, display: filepath.Dir(entry), b: bundle.New(), seen: map[string]bool{}, o: o}
	name := filepath.Base(entry)
	t := &Tree{Bundle: c.b, Entry: name}
	if t.Plan, err = c.manifest(name, nil, nil); err != nil {
		return nil, err
	}
	t.Manifests = len(c.seen)
	return t, nil
}

type collector struct {
	root, realRoot string
	// display is the entry's directory as the caller wrote it: file names
	// in errors are relative to it, as the entry's is.
	display string
	b       *bundle.Bundle
	seen    map[string]bool
	o       Opts
}

// file adds a bundle path's file from disk, refusing symlinks that leave
// the root.
func (c *collector) file(name string) ([]byte, error) {
	abs := filepath.Join(c.root, filepath.FromSlash(name))
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(c.realRoot, real); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%s resolves to %s: %w", name, real, bundle.ErrEscapes)
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return nil, err
	}
	if err := c.b.Add(name, data); err != nil {
		return nil, err
	}
	return data, nil
}

// manifest compiles the manifest at bundle path name with its apply
// resource's data, then its children; ancestors holds the references of
// the resources of the manifests above it.
func (c *collector) manifest(name string, applyData map[string]any, ancestors map[string]bool) (*Plan, error) {
	c.seen[name] = true
	src, err := c.file(name)
	if err != nil {
		return nil, err
	}
	o := c.o
	o.ApplyData = applyData
	o.Dir = filepath.Join(c.root, filepath.FromSlash(path.Dir(name)))
	o.External = func(ref string) bool { return ancestors[ref] }
	if len(ancestors) == 0 {
		o.External = nil
	}
	p, err := Source(filepath.Join(c.display, filepath.FromSlash(name)), src, o)
	if err != nil {
		return nil, err
	}
	// The children may refer to this manifest's resources and its
	// ancestors'.
	inner := make(map[string]bool, len(ancestors)+len(p.Manifest.Resources))
	for ref := range ancestors {
		inner[ref] = true
	}
	for _, r := range p.Manifest.Resources {
		inner[r.Ref()] = true
		if r.Alias != "" {
			inner[r.Type+"#"+r.Alias] = true
		}
	}
	scope := template.Scope{Data: p.Data}
	for _, r := range p.Manifest.Resources {
		switch r.Type {
		case "apply":
			child, err := bundle.Resolve(name, r.Name)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", r.Pos, r.Ref(), err)
			}
			if c.seen[child] {
				continue // applied again (or a cycle): the depth limit deals with cycles at run time
			}
			// Rendered from data alone, as the coordinator renders it.
			props, err := DecodeApply(r.Properties, scope)
			if err != nil {
				return nil, schemas.Errors{{Pos: r.Pos, Path: r.Path, Message: fmt.Sprintf("%s: %v", r.Ref(), err)}}
			}
			if _, err := c.manifest(child, props.Data, inner); err != nil {
				var errs schemas.Errors
				if errors.As(err, &errs) {
					return nil, err // positioned in the child already
				}
				return nil, fmt.Errorf("%s: %s: %w", r.Pos, r.Ref(), err)
			}
		case "file":
			src, _ := r.Properties["source"].(string)
			ref, ok := render(src, scope)
			if !ok || ref == "" || strings.Contains(ref, "://") || strings.HasPrefix(ref, "/") {
				continue
			}
			p, err := bundle.Resolve(name, ref)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: source: %w", r.Pos, r.Ref(), err)
			}
			if _, err := c.file(p); err != nil {
				return nil, fmt.Errorf("%s: %s: source: %w", r.Pos, r.Ref(), err)
			}
		}
	}
	return p, nil
}

// render renders a file source from data; one that needs facts is left to
// the worker (and is then not bundled).
func render(s string, scope template.Scope) (string, bool) {
	if s == "" || !template.HasTemplate(s) {
		return s, true
	}
	v, err := template.Render(s, scope)
	if err != nil {
		return "", false
	}
	str, ok := v.(string)
	return str, ok
}
