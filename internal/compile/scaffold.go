package compile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	texttemplate "text/template"

	"github.com/CloudyKit/jet/v6"

	"github.com/manifold-run/manifold/resources/scaffold"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// ErrScaffoldOutside is wrapped by the error of a scaffold whose source
// leaves the manifest's directory.
var ErrScaffoldOutside = errors.New("compile: scaffold source is outside the manifest directory")

// checkScaffold checks a scaffold resource's source: it must stay inside
// the manifest's directory (it travels with the manifest), and when that
// directory is on this host every template in it must parse with the
// resource's engine and delimiters. A source given by a template is the
// worker's to check.
func checkScaffold(r *schemas.Resource, scope template.Scope) error {
	src, _ := r.Properties["source"].(string)
	if src == "" || template.HasTemplate(src) {
		return nil
	}
	rel := filepath.Clean(src)
	if filepath.IsAbs(src) {
		if scope.Dir == "" {
			return nil
		}
		var err error
		if rel, err = filepath.Rel(scope.Dir, src); err != nil {
			rel = ".."
		}
	}
	if !filepath.IsLocal(rel) && rel != "." {
		return fmt.Errorf("%w: %q", ErrScaffoldOutside, src)
	}
	if scope.Dir == "" {
		return nil
	}
	files, err := scaffold.ReadSource(scope.Dir, rel)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil // the worker reports it
	case errors.Is(err, scaffold.ErrSourceOutside):
		return fmt.Errorf("%w: %q: %w", ErrScaffoldOutside, src, err)
	case err != nil:
		return fmt.Errorf("%q: %w", src, err)
	}
	engine, _ := r.Properties["engine"].(string)
	left, _ := r.Properties["left_delimiter"].(string)
	right, _ := r.Properties["right_delimiter"].(string)
	if left == "" || right == "" {
		left, right = "[[", "]]"
		if engine == "go" {
			left, right = "{{", "}}"
		}
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	if engine == "go" {
		funcs := (template.Scope{}).GoFunctions()
		funcs["render"] = func(string, any) (string, error) { return "", nil }
		funcs["write"] = func(string, string) (string, error) { return "", nil }
		for _, p := range names {
			if _, err := texttemplate.New(p).Delims(left, right).Funcs(funcs).Parse(string(files[p])); err != nil {
				return fmt.Errorf("%q: %s", src, firstLine(err.Error()))
			}
		}
		return nil
	}
	loader := jet.NewInMemLoader()
	for p, b := range files {
		loader.Set("/"+p, string(b))
	}
	set := jet.NewSet(loader, jet.WithDelims(left, right), jet.WithCache(template.NewJetCache()),
		jet.WithSafeWriter(func(w io.Writer, b []byte) { _, _ = w.Write(b) }))
	noop := func(jet.Arguments) reflect.Value { return reflect.Value{} }
	for k, f := range (template.Scope{}).JetFunctions() {
		set.AddGlobalFunc(k, f)
	}
	set.AddGlobalFunc("render", noop)
	set.AddGlobalFunc("write", noop)
	for _, p := range names {
		if _, err := set.GetTemplate("/" + p); err != nil {
			return fmt.Errorf("%q: %s: %s", src, p, firstLine(err.Error()))
		}
	}
	return nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
