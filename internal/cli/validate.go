package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/schemas"
)

const validateAbout = `Checks a manifest (YAML, JSON or CUE) against manifold's schemas, its
references and its templated names, without running anything. Each problem
is printed as file:line:col: path: message. Exit 0 when valid, 2 when not.`

func runValidate(_ context.Context, st IO, args []string) int {
	data := dataFlags{}
	fs := newFlags("validate", "[flags] MANIFEST", validateAbout, st, args)
	fs.Var(data, "data", "data override used to render templated names: key=value, repeatable")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(st.Stderr, "manifold validate: want exactly one MANIFEST argument")
		return ExitInvalid
	}
	m, err := loadPrepared(pos[0], data)
	if err != nil {
		printValidation(st.Stderr, err)
		return ExitInvalid
	}
	noun := "resources"
	if len(m.Resources) == 1 {
		noun = "resource"
	}
	fmt.Fprintf(st.Stdout, "%s: valid, %d %s\n", pos[0], len(m.Resources), noun)
	return ExitOK
}

func loadPrepared(path string, data map[string]any) (*schemas.Manifest, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := schemas.Parse(path, src)
	if err != nil {
		return nil, err
	}
	if _, err := coordinator.Prepare(m, data); err != nil {
		return nil, err
	}
	return m, nil
}

const renderAbout = `Prints a manifest in the normalised flat form as JSON: CCM block shapes
and defaults expanded, names rendered from data. Useful to see what
manifold will run.`

func runRender(_ context.Context, st IO, args []string) int {
	data := dataFlags{}
	fs := newFlags("render", "[flags] MANIFEST", renderAbout, st, args)
	fs.Var(data, "data", "data override: key=value, repeatable")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(st.Stderr, "manifold render: want exactly one MANIFEST argument")
		return ExitInvalid
	}
	m, err := loadPrepared(pos[0], data)
	if err != nil {
		printValidation(st.Stderr, err)
		return ExitInvalid
	}
	enc := json.NewEncoder(st.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(m)
	return ExitOK
}

func runSchema(_ context.Context, st IO, args []string) int {
	fs := newFlags("schema", "[TYPE]", "Prints the CUE schemas manifests are validated against.", st, args)
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	files := schemas.Files()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if len(pos) > 0 && n != pos[0]+".cue" && n != pos[0] {
			continue
		}
		fmt.Fprintf(st.Stdout, "// %s\n%s\n", n, files[n])
	}
	return ExitOK
}
