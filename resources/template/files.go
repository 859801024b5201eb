package template

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/CloudyKit/jet/v6"
)

const (
	// MaxFileSize bounds a file read by file(), readFile(), template() or
	// jet(): 1 MiB.
	MaxFileSize = 1 << 20
	// MaxDepth bounds the nesting of template() and jet() calls: 8.
	MaxDepth = 8
)

// readFile implements file(path) and readFile(path): the text of a file
// under Scope.Dir.
func (s Scope) readFile(name string) (string, error) {
	b, err := s.read(name)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// read returns the content of name, a path relative to s.Dir that must
// stay inside it (symlinks included: os.Root refuses to leave it).
func (s Scope) read(name string) ([]byte, error) {
	b, err := s.readRaw(name)
	if err != nil || s.OnRead == nil {
		return b, err
	}
	if err := s.OnRead(filepath.ToSlash(filepath.Clean(name)), b); err != nil {
		return nil, fmt.Errorf("template: %q: %w", name, err)
	}
	return b, nil
}

// ReadFile reads name as file() does: relative to the scope's directory
// (or from Files), never outside it, at most MaxFileSize bytes, told to
// OnRead.
func (s Scope) ReadFile(name string) ([]byte, error) { return s.read(name) }

// readRaw reads name from s.Files or under s.Dir.
func (s Scope) readRaw(name string) ([]byte, error) {
	if s.Files != nil {
		if !filepath.IsLocal(name) {
			return nil, fmt.Errorf("%w: %q", ErrOutsideDir, name)
		}
		b, err := s.Files(filepath.ToSlash(filepath.Clean(name)))
		if err != nil {
			return nil, fmt.Errorf("template: %q: %w", name, err)
		}
		if len(b) > MaxFileSize {
			return nil, fmt.Errorf("%w: %q is over %d bytes", ErrFileTooLarge, name, MaxFileSize)
		}
		return b, nil
	}
	if s.Dir == "" {
		return nil, fmt.Errorf("%w: %q", ErrNoDir, name)
	}
	if !filepath.IsLocal(name) {
		return nil, fmt.Errorf("%w: %q", ErrOutsideDir, name)
	}
	root, err := os.OpenRoot(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("template: %q: %w", name, os.ErrNotExist)
		}
		// os.Root refuses a path whose symlinks lead out of the root.
		if _, lerr := root.Lstat(name); lerr == nil || strings.Contains(err.Error(), "escapes") {
			return nil, fmt.Errorf("%w: %q (%v)", ErrOutsideDir, name, err)
		}
		return nil, fmt.Errorf("template: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("template: %q is a directory", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("template: %q: %w", name, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%w: %q is over %d bytes", ErrFileTooLarge, name, MaxFileSize)
	}
	return b, nil
}

// nested returns the scope of a template() or jet() call one level down.
func (s Scope) nested() (Scope, error) {
	if s.depth >= MaxDepth {
		return s, fmt.Errorf("%w: more than %d levels", ErrDepthExceeded, MaxDepth)
	}
	s = s.bounded()
	if err := s.budget.check(); err != nil {
		return s, err
	}
	s.depth++
	return s, nil
}

// template implements template(arg), as CCM: a path ending in ".jet" is
// rendered by jet(); one ending in ".templ" is read and rendered as a
// {{ }} / ${ } template; anything else is itself rendered as a template.
// A single-expression template keeps its native type.
func (s Scope) template(arg string) (any, error) {
	switch filepath.Ext(arg) {
	case ".jet":
		return s.jet(arg)
	case ".templ":
		b, err := s.read(arg)
		if err != nil {
			return nil, err
		}
		arg = string(b)
	}
	child, err := s.nested()
	if err != nil {
		return nil, err
	}
	return Render(arg, child)
}

// jet implements jet(body, [left, right]): body is Jet template text, or a
// path ending in ".jet" under Dir. Delimiters default to "[[" and "]]".
// Templates see Data, Facts and Environ (and their lowercase spellings) and
// the functions lookup, file, readFile and template.
func (s Scope) jet(body string, delims ...string) (string, error) {
	left, right := "[[", "]]"
	switch len(delims) {
	case 0:
	case 2:
		left, right = delims[0], delims[1]
		if left == "" || right == "" {
			return "", fmt.Errorf("%w: delimiters must not be empty", ErrJet)
		}
	default:
		return "", fmt.Errorf("%w: takes a body and optionally two delimiters, got %d delimiters", ErrJet, len(delims))
	}
	name := "inline"
	if strings.HasSuffix(body, ".jet") {
		b, err := s.read(body)
		if err != nil {
			return "", err
		}
		name, body = body, string(b)
	}
	return s.jetText(name, body, left, right)
}

// RenderJetFile renders the Jet template file name (relative to the
// scope's directory, [[ ]] delimiters) over the scope, as jet('name')
// does whatever the file's extension: CCM's resources_jet_file.
func RenderJetFile(name string, s Scope) (string, error) {
	s = s.bounded()
	b, err := s.read(name)
	if err != nil {
		return "", err
	}
	return s.jetText(name, string(b), "[[", "]]")
}

// jetText renders Jet template text named name.
func (s Scope) jetText(name, body, left, right string) (string, error) {
	child, err := s.nested()
	if err != nil {
		return "", err
	}
	tpl, err := parseJet(name, body, left, right, child.jetFunctions())
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := executeJet(tpl, &buf, child.jetVariables(), nil, MaxFileSize, child.budget); err != nil {
		if errors.Is(err, ErrJet) || errors.Is(err, ErrDepthExceeded) || errors.Is(err, ErrLimit) {
			return "", err
		}
		return "", fmt.Errorf("%w: %s: %w", ErrJet, name, err)
	}
	return buf.String(), nil
}

// parseJet parses Jet template text named name with the given delimiters
// and global functions (nil: the names of a scope's, for a syntax check).
func parseJet(name, body, left, right string, funcs map[string]jet.Func) (*jet.Template, error) {
	set := jet.NewSet(jet.NewInMemLoader(), jet.WithDelims(left, right), jet.WithCache(NewJetCache()),
		jet.WithSafeWriter(func(w io.Writer, b []byte) { _, _ = w.Write(b) }))
	if funcs == nil {
		funcs = Scope{}.jetFunctions()
	}
	for k, f := range funcs {
		set.AddGlobalFunc(k, f)
	}
	tpl, err := set.Parse(name, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrJet, name, firstLine(err.Error()))
	}
	return tpl, nil
}

func (s Scope) jetVariables() jet.VarMap {
	env := s.env()
	vars := jet.VarMap{}
	for _, k := range []string{"Data", "data", "Facts", "facts", "Environ", "environ"} {
		vars.Set(k, env[k])
	}
	return vars
}

func (s Scope) jetFunctions() map[string]jet.Func {
	str := func(name string, a jet.Arguments, i int) string {
		v := a.Get(i)
		if !v.IsValid() || v.Kind() != reflect.String {
			a.Panicf("%s: argument %d must be a string", name, i+1)
		}
		return v.String()
	}
	file := func(a jet.Arguments) reflect.Value {
		a.RequireNumOfArguments("file", 1, 1)
		out, err := s.readFile(str("file", a, 0))
		if err != nil {
			a.Panicf("%w", err)
		}
		return reflect.ValueOf(out)
	}
	return map[string]jet.Func{
		"lookup": func(a jet.Arguments) reflect.Value {
			a.RequireNumOfArguments("lookup", 1, 2)
			key := str("lookup", a, 0)
			var def []any
			if a.NumOfArguments() == 2 {
				def = append(def, a.Get(1).Interface())
			}
			out, err := s.lookup(key, def...)
			if err != nil {
				a.Panicf("%w", err)
			}
			return reflect.ValueOf(out)
		},
		"file":     file,
		"readFile": file,
		"template": func(a jet.Arguments) reflect.Value {
			a.RequireNumOfArguments("template", 1, 1)
			out, err := s.template(str("template", a, 0))
			if err != nil {
				a.Panicf("%w", err)
			}
			return reflect.ValueOf(out)
		},
		"registrations": s.jetRegistrations, // registrations.go
	}
}
