package bundle

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// Build collects the entry manifest and what it references into a
// bundle rooted at the entry's directory: child manifests of apply
// resources (recursively) and the `source` files of file resources. Names
// written as templates are rendered from the manifests' data and overrides;
// a reference that cannot be rendered here is left to fail at run time.
// It returns the bundle and the entry's path inside it.
func Build(entry string, overrides map[string]any) (*Bundle, string, error) {
	root, err := filepath.Abs(filepath.Dir(entry))
	if err != nil {
		return nil, "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, "", err
	}
	c := &collector{root: root, realRoot: realRoot, b: New(), seen: map[string]bool{}, overrides: overrides}
	name := filepath.Base(entry)
	if err := c.manifest(name, nil); err != nil {
		return nil, "", err
	}
	return c.b, name, nil
}

type collector struct {
	root, realRoot string
	b              *Bundle
	seen           map[string]bool
	overrides      map[string]any
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
		return nil, fmt.Errorf("%s resolves to %s: %w", name, real, ErrEscapes)
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

func (c *collector) manifest(name string, applyData map[string]any) error {
	if c.seen[name] {
		return nil // applied again (or a cycle): the depth limit deals with cycles at run time
	}
	c.seen[name] = true
	src, err := c.file(name)
	if err != nil {
		return err
	}
	m, err := schemas.ParseUnchecked(filepath.Join(c.root, filepath.FromSlash(name)), src)
	if err != nil {
		return err
	}
	data := merge(merge(m.Data, applyData), c.overrides)
	scope := template.Scope{Data: data}
	for _, r := range m.Resources {
		switch r.Type {
		case "apply":
			ref, ok := render(r.Name, scope)
			if !ok {
				continue
			}
			child, err := Resolve(name, ref)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", r.Pos, r.Ref(), err)
			}
			childData, _ := r.Properties["data"].(map[string]any)
			if v, err := template.RenderValue(childData, scope); err == nil {
				childData, _ = v.(map[string]any) // rendered as the coordinator renders it
			}
			if err := c.manifest(child, childData); err != nil {
				return fmt.Errorf("%s: %s: %w", r.Pos, r.Ref(), err)
			}
		case "file":
			src, _ := r.Properties["source"].(string)
			ref, ok := render(src, scope)
			if !ok || ref == "" || strings.Contains(ref, "://") || strings.HasPrefix(ref, "/") {
				continue
			}
			p, err := Resolve(name, ref)
			if err != nil {
				return fmt.Errorf("%s: %s: source: %w", r.Pos, r.Ref(), err)
			}
			if _, err := c.file(p); err != nil {
				return fmt.Errorf("%s: %s: source: %w", r.Pos, r.Ref(), err)
			}
		}
	}
	return nil
}

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

// merge is a shallow merge for rendering names: over's keys win.
func merge(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, over)
	return out
}
