package scaffold

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
)

// Type is the resource type name, as written in manifests.
const Type = "scaffold"

const (
	// MaxTemplates bounds the files under the source directory, partials
	// included (10,000).
	MaxTemplates = 10_000
	// MaxFileBytes bounds one template and one rendered file (1 MiB).
	MaxFileBytes = 1 << 20
	// MaxTotalBytes bounds the rendered output of one scaffold (64 MiB).
	MaxTotalBytes = 64 << 20
	// MaxTargetEntries bounds the entries walked under the target to find
	// files to purge (100,000).
	MaxTargetEntries = 100_000
	// MaxDepth bounds the nesting of render() calls (8).
	MaxDepth = 8
	// listed is how many paths a message names before "and N more".
	listed = 10
)

// limits are the bounds in effect; tests lower them.
type limits struct {
	templates, fileBytes, totalBytes, targetEntries int
}

var defaultLimits = limits{templates: MaxTemplates, fileBytes: MaxFileBytes, totalBytes: MaxTotalBytes, targetEntries: MaxTargetEntries}

// Ensure is the desired state of a scaffold.
type Ensure string

const (
	// EnsurePresent renders the templates into the target; the default.
	EnsurePresent Ensure = "present"
	// EnsureAbsent removes the files the templates produce.
	EnsureAbsent Ensure = "absent"
)

// Engine is a template engine.
type Engine string

const (
	// EngineJet is Jet (github.com/CloudyKit/jet), [[ ]] by default; the
	// default engine.
	EngineJet Engine = "jet"
	// EngineGo is Go's text/template, {{ }} by default.
	EngineGo Engine = "go"
)

// Properties are the scaffold type's properties (CCM's names).
type Properties struct {
	// Source is the template directory, relative to the manifest's
	// directory in the bundle (or absolute inside it).
	Source string `json:"source"`
	// Engine is jet (the default) or go.
	Engine Engine `json:"engine,omitempty"`
	// SkipEmpty leaves out files that render to whitespace only.
	SkipEmpty bool `json:"skip_empty,omitempty"`
	// LeftDelimiter and RightDelimiter replace the engine's delimiters;
	// set both or neither.
	LeftDelimiter  string `json:"left_delimiter,omitempty"`
	RightDelimiter string `json:"right_delimiter,omitempty"`
	// Purge removes files under the target the templates do not produce.
	Purge bool `json:"purge,omitempty"`
	// Data, when set, replaces the run's data in the templates.
	Data map[string]any `json:"data,omitempty"`
	// Post maps file-name globs to commands run after a matching file was
	// written; "{}" in the command is the file's path, which is appended
	// when absent. Entries run in order.
	Post []map[string]string `json:"post,omitempty"`
}

// Scaffold is a scaffold resource. Build it with New.
type Scaffold struct {
	target   string
	provider string
	ensure   Ensure
	props    Properties
	lim      limits
}

var (
	_ resources.Resource = (*Scaffold)(nil)
	_ resources.Factory  = New
)

// New is the scaffold type's resources.Factory: it decodes spec's
// properties.
func New(spec resources.Spec) (resources.Resource, error) {
	s := &Scaffold{target: spec.Name, ensure: Ensure(spec.Ensure), provider: spec.Provider, lim: defaultLimits}
	if s.ensure == "" {
		s.ensure = EnsurePresent
	}
	if err := resources.DecodeProperties(spec.Properties, &s.props); err != nil {
		return nil, err
	}
	if s.props.Engine == "" {
		s.props.Engine = EngineJet
	}
	return s, nil
}

// Validate checks the properties without touching the system.
func (s *Scaffold) Validate() error {
	if !filepath.IsAbs(s.target) || filepath.Clean(s.target) != s.target {
		return fmt.Errorf("name %q: must be a clean absolute path", s.target)
	}
	if s.target == "/" {
		return errors.New(`name "/": refusing to scaffold into the root directory`)
	}
	if s.provider != "" && s.provider != "choria" {
		return fmt.Errorf("provider %q: scaffold has only the choria provider", s.provider)
	}
	switch s.ensure {
	case EnsurePresent, EnsureAbsent:
	default:
		return fmt.Errorf("ensure %q: must be present or absent", s.ensure)
	}
	if s.props.Source == "" {
		return errors.New("source: must not be empty")
	}
	switch s.props.Engine {
	case EngineJet, EngineGo:
	default:
		return fmt.Errorf("engine %q: must be jet or go", s.props.Engine)
	}
	if (s.props.LeftDelimiter == "") != (s.props.RightDelimiter == "") {
		return errors.New("left_delimiter and right_delimiter: set both or neither")
	}
	for i, entry := range s.props.Post {
		for glob, cmd := range entry {
			if glob == "" || cmd == "" {
				return fmt.Errorf("post[%d]: glob and command must not be empty", i)
			}
			if _, err := filepath.Match(glob, ""); err != nil {
				return fmt.Errorf("post[%d]: glob %q: %w", i, glob, err)
			}
		}
	}
	return nil
}

// delims returns the delimiters in effect.
func (s *Scaffold) delims() (string, string) {
	if s.props.LeftDelimiter != "" {
		return s.props.LeftDelimiter, s.props.RightDelimiter
	}
	if s.props.Engine == EngineGo {
		return "{{", "}}"
	}
	return "[[", "]]"
}

// CheckApply renders the templates and compares them with the target;
// with apply it writes the changed files (running their post commands)
// and, with purge, removes the files the templates do not produce.
// ensure absent removes the produced files instead.
func (s *Scaffold) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if env == nil {
		env = &resources.Env{}
	}
	src, err := loadSource(env.Root, env.WorkDir, s.props.Source, s.lim)
	if err != nil {
		return resources.Result{}, fmt.Errorf("source %q: %w", s.props.Source, err)
	}
	data := env.Data
	if s.props.Data != nil {
		data = s.props.Data
	}
	scope := template.Scope{Data: data, Facts: env.Facts, Environ: env.Environ, Dir: env.WorkDir}
	left, right := s.delims()
	out, err := render(src, s.props.Engine, left, right, s.props.SkipEmpty, scope, s.lim)
	if err != nil {
		return resources.Result{}, err
	}
	t := target{dir: s.target, lim: s.lim}
	if s.ensure == EnsureAbsent {
		return t.absent(out, apply)
	}
	plan, err := t.plan(out, s.props.Purge)
	if err != nil {
		return resources.Result{}, err
	}
	if plan.empty() {
		return resources.Result{}, nil
	}
	res := resources.Result{Changed: true, Message: plan.message(), Diff: plan.diff()}
	if !apply {
		return res, nil
	}
	post := func(path string) error { return s.runPost(ctx, env, path) }
	if err := t.apply(plan, out, post); err != nil {
		return resources.Result{}, err
	}
	return res, nil
}

// runPost runs the post commands whose glob matches path's base name.
func (s *Scaffold) runPost(ctx context.Context, env *resources.Env, path string) error {
	runner := env.Runner
	if runner == nil {
		runner = resources.OSRunner{}
	}
	for i, entry := range s.props.Post {
		globs := make([]string, 0, len(entry))
		for g := range entry {
			globs = append(globs, g)
		}
		sort.Strings(globs)
		for _, g := range globs {
			if ok, _ := filepath.Match(g, filepath.Base(path)); !ok {
				continue
			}
			argv, err := postArgv(entry[g], path)
			if err != nil {
				return fmt.Errorf("post[%d] %q: %w: %w", i, g, ErrPost, err)
			}
			r, err := runner.Run(ctx, resources.Command{Argv: argv, Dir: filepath.Dir(path)})
			if err != nil {
				return fmt.Errorf("post[%d] %q on %s: %w: %w", i, g, path, ErrPost, err)
			}
			if r.ExitCode != 0 {
				return fmt.Errorf("post[%d] %q on %s: %w: %s exited %d: %s", i, g, path, ErrPost, argv[0], r.ExitCode,
					strings.TrimSpace(string(r.Stderr)+" "+string(r.Stdout)))
			}
		}
	}
	return nil
}
