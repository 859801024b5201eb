package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/CloudyKit/jet/v6"

	"github.com/manifold-run/manifold/resources/template"
)

// partials is the name of directories whose files are only included.
const partials = "_partials"

// source is a template directory read into memory: slash-separated
// relative paths to contents.
type source map[string][]byte

// loadSource reads the template directory src, relative to workDir (the
// process's working directory when empty) or absolute inside it, never
// outside rootDir (workDir when empty); os.Root refuses symbolic links
// that lead out. Entries other than regular files and directories are
// refused, as are sources past MaxTemplates or MaxFileBytes.
func loadSource(rootDir, workDir, src string, lim limits) (source, error) {
	if workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		workDir = wd
	}
	base := rootDir
	if base == "" {
		base = workDir
	}
	abs := src
	if !filepath.IsAbs(src) {
		abs = filepath.Join(workDir, src)
	}
	rel, err := filepath.Rel(base, abs)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		return nil, fmt.Errorf("%w: must be inside %s", ErrSourceOutside, base)
	}
	return readSource(base, rel, lim)
}

// ReadSource reads the template directory rel (relative to dir) into
// memory, as a worker reads it: never through a symbolic link leading
// out of dir (ErrSourceOutside), regular files and directories only, within
// MaxTemplates files of MaxFileBytes. The compiler uses it to check a
// scaffold's templates before the run.
func ReadSource(dir, rel string) (map[string][]byte, error) {
	return readSource(dir, rel, defaultLimits)
}

func readSource(base, rel string, lim limits) (source, error) {
	root, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	sub, err := root.OpenRoot(rel)
	if err != nil {
		if strings.Contains(err.Error(), "escapes") {
			return nil, fmt.Errorf("%w: %w", ErrSourceOutside, err)
		}
		return nil, err
	}
	defer sub.Close()
	out := source{}
	err = fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file or directory (%s)", p, d.Type())
		}
		if len(out) >= lim.templates {
			return fmt.Errorf("%w: more than %d files", ErrTooLarge, lim.templates)
		}
		f, err := sub.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, int64(lim.fileBytes)+1))
		if err != nil {
			return err
		}
		if len(b) > lim.fileBytes {
			return fmt.Errorf("%w: %s is larger than %d bytes", ErrTooLarge, p, lim.fileBytes)
		}
		out[p] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// isPartial reports whether p lies under a _partials directory.
func isPartial(p string) bool {
	for _, part := range strings.Split(path.Dir(p), "/") {
		if part == partials {
			return true
		}
	}
	return false
}

// renderer renders one scaffold's templates.
type renderer struct {
	src         source
	engine      Engine
	left, right string
	scope       template.Scope
	jet         *jet.Set
	depth       int
	lim         limits
	// out collects the rendered files; written collects write()'s.
	out, written map[string][]byte
	total        int
}

// render renders every template of src outside _partials. It returns the
// files to write, keyed by slash-separated relative path; with skipEmpty,
// files rendering to whitespace only are left out.
func render(src source, engine Engine, left, right string, skipEmpty bool, scope template.Scope, lim limits) (map[string][]byte, error) {
	r := &renderer{src: src, engine: engine, left: left, right: right, scope: scope, lim: lim,
		out: map[string][]byte{}, written: map[string][]byte{}}
	if engine == EngineJet {
		loader := jet.NewInMemLoader()
		for p, b := range src {
			loader.Set("/"+p, string(b))
		}
		r.jet = jet.NewSet(loader, jet.WithDelims(left, right),
			jet.WithSafeWriter(func(w io.Writer, b []byte) { _, _ = w.Write(b) }), jet.WithCache(template.NewJetCache()))
		for k, f := range r.jetFunctions() {
			r.jet.AddGlobalFunc(k, f)
		}
	}
	names := make([]string, 0, len(src))
	for p := range src {
		if !isPartial(p) {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	for _, p := range names {
		b, err := r.renderFile(p, scope.Variables())
		if err != nil {
			return nil, err
		}
		if skipEmpty && len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if err := r.add(r.out, p, b); err != nil {
			return nil, err
		}
	}
	for p, b := range r.written {
		if _, ok := r.out[p]; ok {
			return nil, fmt.Errorf("%w: write(%q): a template renders that file too", ErrRender, p)
		}
		r.out[p] = b
	}
	return r.out, nil
}

// add records a rendered file against the limits.
func (r *renderer) add(into map[string][]byte, p string, b []byte) error {
	if len(b) > r.lim.fileBytes {
		return fmt.Errorf("%w: %s renders over %d bytes", ErrTooLarge, p, r.lim.fileBytes)
	}
	r.total += len(b)
	if r.total > r.lim.totalBytes {
		return fmt.Errorf("%w: the templates render over %d bytes", ErrTooLarge, r.lim.totalBytes)
	}
	into[p] = b
	return nil
}

// renderFile renders the template at p with dot as its data.
func (r *renderer) renderFile(p string, dot any) (out []byte, err error) {
	if r.depth >= MaxDepth {
		return nil, fmt.Errorf("%w: render() nested deeper than %d", ErrTooLarge, MaxDepth)
	}
	r.depth++
	defer func() { r.depth-- }()
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%w: %s: %v", ErrRender, p, rec)
		}
	}()
	var buf bytes.Buffer
	if r.engine == EngineJet {
		tpl, err := r.jet.GetTemplate("/" + p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s", ErrRender, p, firstLine(err.Error()))
		}
		// Bounded: nesting, output (the file limit) and time.
		if err := template.ExecuteJet(tpl, &buf, r.scope.JetVariables(), dot, r.lim.fileBytes, time.Time{}); err != nil {
			if errors.Is(err, ErrRender) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrSourceOutside) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %s: %w", ErrRender, p, err)
		}
	} else {
		funcs := r.scope.GoFunctions()
		funcs["render"] = func(name string, data any) (string, error) {
			b, err := r.partial(name, data)
			return string(b), err
		}
		funcs["write"] = func(name, content string) (string, error) { return "", r.write(name, content) }
		tpl, err := texttemplate.New(p).Delims(r.left, r.right).Funcs(funcs).Parse(string(r.src[p]))
		if err != nil {
			return nil, fmt.Errorf("%w: %s", ErrRender, firstLine(err.Error()))
		}
		// Bounded like Jet: nesting, steps, output and time.
		if err := template.ExecuteGo(tpl, &buf, dot, r.lim.fileBytes, time.Time{}); err != nil {
			if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrSourceOutside) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", ErrRender, err)
		}
	}
	if buf.Len() > r.lim.fileBytes {
		return nil, fmt.Errorf("%w: %s renders over %d bytes", ErrTooLarge, p, r.lim.fileBytes)
	}
	return buf.Bytes(), nil
}

// partial implements render(name, data): another template of the source,
// usually under _partials, rendered with data as its dot.
func (r *renderer) partial(name string, data any) ([]byte, error) {
	p, err := localPath(name)
	if err != nil {
		return nil, fmt.Errorf("render(%q): %w", name, err)
	}
	if _, ok := r.src[p]; !ok {
		return nil, fmt.Errorf("%w: render(%q): no such template in the source", ErrRender, name)
	}
	return r.renderFile(p, data)
}

// write implements write(name, content): one more file in the target.
func (r *renderer) write(name, content string) error {
	p, err := localPath(name)
	if err != nil {
		return fmt.Errorf("write(%q): %w", name, err)
	}
	if len(r.out)+len(r.written) >= r.lim.templates {
		return fmt.Errorf("%w: more than %d files", ErrTooLarge, r.lim.templates)
	}
	return r.add(r.written, p, []byte(content))
}

// localPath cleans a slash-separated path that must stay inside its
// directory.
func localPath(name string) (string, error) {
	p := path.Clean(strings.TrimPrefix(filepath.ToSlash(name), "./"))
	if !filepath.IsLocal(p) || p == "." {
		return "", fmt.Errorf("%w: %q", ErrSourceOutside, name)
	}
	return p, nil
}

func (r *renderer) jetFunctions() map[string]jet.Func {
	funcs := r.scope.JetFunctions()
	str := func(name string, a jet.Arguments, i int) string {
		v := a.Get(i)
		if !v.IsValid() || v.Kind() != reflect.String {
			a.Panicf("%s: argument %d must be a string", name, i+1)
		}
		return v.String()
	}
	funcs["render"] = func(a jet.Arguments) reflect.Value {
		a.RequireNumOfArguments("render", 1, 2)
		var data any = r.scope.Variables()
		if a.NumOfArguments() == 2 {
			data = a.Get(1).Interface()
		}
		b, err := r.partial(str("render", a, 0), data)
		if err != nil {
			a.Panicf("%w", err)
		}
		return reflect.ValueOf(string(b))
	}
	funcs["write"] = func(a jet.Arguments) reflect.Value {
		a.RequireNumOfArguments("write", 2, 2)
		if err := r.write(str("write", a, 0), str("write", a, 1)); err != nil {
			a.Panicf("%w", err)
		}
		return reflect.ValueOf("")
	}
	return funcs
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
