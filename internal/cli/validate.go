package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/schemas"
)

const validateAbout = `Checks a manifest (YAML, JSON or CUE) against manifold's schemas, its
references and its templated names, without running anything. Each problem
is printed as file:line:col: path: message. Exit 0 when valid, 2 when not.`

func runValidate(ctx context.Context, st IO, args []string) int {
	var cf compileFlags
	fs := newFlags("validate", "[flags] MANIFEST", validateAbout, st, args)
	cf.register(fs, "data override used to render templated names: key=value, repeatable")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(st.Stderr, "manifold validate: want exactly one MANIFEST argument")
		return ExitInvalid
	}
	m, code, ok := loadPrepared(ctx, st, "validate", pos[0], &cf)
	if !ok {
		return code
	}
	noun := "resources"
	if len(m.Resources) == 1 {
		noun = "resource"
	}
	fmt.Fprintf(st.Stdout, "%s: valid, %d %s\n", pos[0], len(m.Resources), noun)
	return ExitOK
}

// loadPrepared compiles the manifest at path and the manifests it
// applies with this host's facts, printing every problem.
//
// The facts are gathered while the manifest is read and parsed (some 5 ms
// of a validate's wall time on two cores; they are first needed once it
// is parsed), unless --hiera needs them first. What is printed, and when
// it exits, is as if they were gathered first: a facts error alone, or
// the compile's problems.
func loadPrepared(ctx context.Context, st IO, cmd, path string, cf *compileFlags) (*schemas.Manifest, int, bool) {
	if len(cf.hiera) > 0 {
		data, facts, ok := cf.inputs(ctx, st, cmd, true)
		if !ok {
			return nil, ExitInvalid, false
		}
		t, ok := compileTreeOpts(st, cmd, path, compile.Opts{Run: data, Facts: facts, ParseOnce: true})
		if !ok {
			return nil, ExitInvalid, false
		}
		return t.Plan.Manifest, ExitOK, true
	}
	data, gathered, inputsOK := cf.inputsLater(ctx, st, cmd, nil)
	if !inputsOK {
		return nil, ExitInvalid, false
	}
	t, err := compile.Build(path, compile.Opts{Run: data, ParseOnce: true, FactsLater: func() map[string]any {
		f, _ := gathered()
		return f
	}})
	if _, ferr := gathered(); ferr != nil {
		fmt.Fprintf(st.Stderr, "manifold %s: %v\n", cmd, ferr)
		return nil, ExitInvalid, false
	}
	t, ok := reportTree(st, cmd, t, err)
	if !ok {
		return nil, ExitInvalid, false
	}
	return t.Plan.Manifest, ExitOK, true
}

const renderAbout = `Prints a manifest in the normalised flat form as JSON: CCM block shapes
and defaults expanded, names rendered from data. Useful to see what
manifold will run.`

func runRender(ctx context.Context, st IO, args []string) int {
	var cf compileFlags
	fs := newFlags("render", "[flags] MANIFEST", renderAbout, st, args)
	cf.register(fs, "data override: key=value, repeatable")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(st.Stderr, "manifold render: want exactly one MANIFEST argument")
		return ExitInvalid
	}
	m, code, ok := loadPrepared(ctx, st, "render", pos[0], &cf)
	if !ok {
		return code
	}
	enc := json.NewEncoder(st.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(m)
	return ExitOK
}

func runSchema(_ context.Context, st IO, args []string) int {
	fs := newFlags("schema", "[TYPE]", "Prints the CUE schemas manifests are validated against, or (--json-schema) a JSON Schema of manifests for editors.", st, args)
	jsonSchema := fs.Bool("json-schema", false, "print a JSON Schema (draft 2020-12) of manifests, for editors such as the YAML language server")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if *jsonSchema {
		if len(pos) > 0 {
			fmt.Fprintln(st.Stderr, "manifold schema: --json-schema takes no TYPE: it describes whole manifests")
			return ExitInvalid
		}
		b, err := schemas.JSONSchema()
		if err != nil {
			fmt.Fprintf(st.Stderr, "manifold schema: %v\n", err)
			return ExitUnavailable
		}
		fmt.Fprintln(st.Stdout, string(b))
		return ExitOK
	}
	files := schemas.Files()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(pos) > 1 {
		fmt.Fprintln(st.Stderr, "manifold schema: want at most one TYPE argument")
		return ExitInvalid
	}
	if len(pos) == 1 {
		n := strings.TrimSuffix(pos[0], ".cue") + ".cue"
		if _, ok := files[n]; !ok {
			types := make([]string, len(names))
			for i, n := range names {
				types[i] = strings.TrimSuffix(n, ".cue")
			}
			fmt.Fprintf(st.Stderr, "manifold schema: no schema %q (there are: %s)\n", pos[0], strings.Join(types, ", "))
			return ExitInvalid
		}
		names = []string{n}
	}
	for _, n := range names {
		fmt.Fprintf(st.Stdout, "// %s\n%s\n", n, files[n])
	}
	return ExitOK
}
