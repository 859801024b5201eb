package cli

import (
	"flag"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// newFlags returns a flag set whose usage goes to stdout when the user
// asks for it (--help, exit 0) and to stderr after a flag error (exit 2).
func newFlags(name, synopsis, about string, st IO, args []string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(st.Stderr)
	if wantsHelp(args) && st.Stdout != nil {
		fs.SetOutput(st.Stdout)
	}
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: manifold %s %s\n\n%s\n\nFlags:\n", name, synopsis, strings.TrimSpace(about))
		fs.PrintDefaults()
	}
	return fs
}

// wantsHelp reports whether args ask for help before any "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--h", "--help":
			return true
		}
	}
	return false
}

// parse parses args allowing flags after positional arguments
// (`manifold apply site.yaml --noop`). A lone "--" ends flags.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if rest[0] == "--" {
			return append(positional, rest[1:]...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// dataFlags collects repeated --data key=value flags. Values are parsed as
// YAML scalars (8080 is a number, true a bool, "x" a string); dotted keys
// make nested maps (--data app.port=80).
type dataFlags map[string]any

func (d dataFlags) String() string { return "" }

func (d dataFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	var val any
	if err := yaml.Unmarshal([]byte(v), &val); err != nil {
		val = v
	}
	switch val.(type) {
	case map[string]any, []any:
		val = v // only scalars: a value that parses as a collection stays text
	}
	if v == "" {
		val = ""
	}
	parts := strings.Split(k, ".")
	m := map[string]any(d)
	for _, p := range parts[:len(parts)-1] {
		if p == "" {
			return fmt.Errorf("key %q has an empty segment", k)
		}
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = val
	return nil
}

// choice is a string flag limited to some values.
type choice struct {
	value   string
	allowed []string
}

func (c *choice) String() string { return c.value }

func (c *choice) Set(s string) error {
	for _, a := range c.allowed {
		if s == a {
			c.value = s
			return nil
		}
	}
	return fmt.Errorf("want one of %s", strings.Join(c.allowed, ", "))
}

// flagHelp is flag.ErrHelp: --help was asked for.
var flagHelp = flag.ErrHelp
