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
	// Plans holds the plan of every manifest compiled, by its path inside
	// the bundle (Entry's is Plan). A child applied twice has one plan,
	// compiled with the data of its first apply.
	Plans map[string]*Plan
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
	c := &collector{root: root, realRoot: realRoot, display: filepath.Dir(entry), b: bundle.New(), seen: map[string]bool{}, read: map[string]bool{}, plans: map[string]*Plan{}, o: o}
	name := filepath.Base(entry)
	t := &Tree{Bundle: c.b, Entry: name, Plans: c.plans}
	if t.Plan, err = c.manifest(name, nil, nil); err != nil {
		return nil, err
	}
	t.Manifests = len(c.seen)
	return t, nil
}

type collector struct {
	// read holds the bundle paths of the files templates read.
	read           map[string]bool
	root, realRoot string
	// display is the entry's directory as the caller wrote it: file names
	// in errors are relative to it, as the entry's is.
	display string
	b       *bundle.Bundle
	seen    map[string]bool
	plans   map[string]*Plan
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
	o.OnRead = c.onRead(name, o.Dir)
	o.External = func(ref string) bool { return ancestors[ref] }
	if len(ancestors) == 0 {
		o.External = nil
	}
	p, err := Source(filepath.Join(c.display, filepath.FromSlash(name)), src, o)
	if err != nil {
		return nil, err
	}
	c.plans[name] = p
	// The children may refer to this manifest's resources and its
	// ancestors': made at the first child (a manifest without apply
	// resources, nearly all, makes none).
	var inner map[string]bool
	children := func() map[string]bool {
		if inner != nil {
			return inner
		}
		inner = make(map[string]bool, len(ancestors)+len(p.Manifest.Resources))
		for ref := range ancestors {
			inner[ref] = true
		}
		for _, r := range p.Manifest.Resources {
			inner[r.Ref()] = true
			if r.Alias != "" {
				inner[r.Type+"#"+r.Alias] = true
			}
		}
		return inner
	}
	if err := c.templateFiles(p, template.Scope{Dir: o.Dir, OnRead: o.OnRead}); err != nil {
		return nil, err
	}
	scope := template.Scope{Data: p.Data}
	for i := range p.Manifest.Resources {
		r := &p.Manifest.Resources[i]
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
			if _, err := c.manifest(child, props.Data, children()); err != nil {
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

// onRead returns the OnRead hook of the manifest at bundle path name,
// whose directory on disk is dir: each file a template reads is added to
// the bundle, and the files a template file (.jet, .templ) names in
// literal arguments are read in turn, so that workers find them whichever
// branch their facts take.
func (c *collector) onRead(name, dir string) func(string, []byte) error {
	base := path.Dir(name)
	var hook func(string, []byte) error
	hook = func(rel string, content []byte) error {
		p := path.Join(base, rel)
		if c.read[p] {
			return nil
		}
		c.read[p] = true
		if err := c.b.Add(p, content); err != nil {
			return err
		}
		if ext := path.Ext(rel); ext != ".jet" && ext != ".templ" {
			return nil
		}
		s := template.Scope{Dir: dir, OnRead: hook}
		for _, ref := range fileRefs(string(content)) {
			if _, err := s.ReadFile(ref); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		return nil
	}
	return hook
}

// templateFiles bundles the files m's templates name in literal
// arguments (file('motd.txt'), template('app.templ'), jet('x.jet')) in
// any property or health check, rendered before the run or not: a
// property rendered on a worker reads them from the bundle. A path outside
// the manifest's directory is an error naming the resource and property;
// a missing file is left for the worker to report (it may never be read).
func (c *collector) templateFiles(p *Plan, s template.Scope) error {
	var errs schemas.Errors
	m := p.Manifest
	for i := range m.Resources {
		r := &m.Resources[i]
		if !p.mayNameFiles(i) {
			continue
		}
		for _, k := range sortedKeys(r.Properties) {
			for _, str := range stringsIn(r.Properties[k]) {
				for _, ref := range fileRefs(str) {
					if _, err := s.ReadFile(ref); err != nil && !errors.Is(err, os.ErrNotExist) {
						errs = append(errs, &schemas.Error{Pos: r.Pos, Path: r.Path + "." + k, Message: fmt.Sprintf("%s: %v", r.Ref(), err), Err: err})
					}
				}
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// stringsIn lists the template strings inside v (maps and lists walked).
func stringsIn(v any) []string {
	switch v := v.(type) {
	case string:
		if template.HasTemplate(v) {
			return []string{v}
		}
	case map[string]any:
		var out []string
		for _, k := range sortedKeys(v) {
			out = append(out, stringsIn(v[k])...)
		}
		return out
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, stringsIn(e)...)
		}
		return out
	}
	return nil
}
