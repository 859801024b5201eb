package cli

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/manifold-run/manifold/bus"
)

// newFlags returns a flag set whose usage goes to stdout when the user
// asks for it (--help, exit 0). After a flag or argument error (exit 2)
// stderr gets the error and the synopsis with a pointer to --help, not
// the whole help, which would scroll the error away.
func newFlags(name, synopsis, about string, st IO, args []string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(st.Stderr)
	help := wantsHelp(args)
	if help && st.Stdout != nil {
		fs.SetOutput(st.Stdout)
	}
	fs.Usage = func() {
		out := fs.Output()
		if !help {
			fmt.Fprintf(out, "Usage: manifold %s %s\nRun 'manifold %s --help' for its flags.\n", name, synopsis, name)
			return
		}
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
// (`manifold apply site.yaml --noop`). A lone "--" ends flags. A numeric
// flag given a value out of its range (flagRanges) is an error, printed
// like the flag package's own.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 || rest[0] == "--" {
			if len(rest) > 0 {
				positional = append(positional, rest[1:]...)
			}
			if err := checkRanges(fs); err != nil {
				fmt.Fprintf(fs.Output(), "manifold %s: %v\n", fs.Name(), err)
				return nil, err
			}
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// flagRange is the range of a numeric flag's value: a duration in
// nanoseconds or an integer.
type flagRange struct {
	min, max int64
	// why says what the range is, in the error.
	why string
}

const unbounded = int64(^uint64(0) >> 1)

// flagRanges holds the range of each numeric flag, by "command flag"
// first, then by flag name for every command that has it. Zero values
// that mean "the default" are allowed where the flag's help says so.
var flagRanges = map[string]flagRange{
	"timeout":            {1, unbounded, "must be more than 0"},
	"task-timeout":       {0, unbounded, "must not be negative (0: the default)"},
	"max-depth":          {0, unbounded, "must not be negative"},
	"apply max-depth":    {1, unbounded, "must be at least 1 (a manifest without apply resources needs no limit)"},
	"apply concurrency":  {0, unbounded, "must not be negative (0: the number of CPUs)"},
	"worker concurrency": {1, unbounded, "must be at least 1"},
	"lease":              {1, unbounded, "must be more than 0"},
	"ack-wait":           {1, unbounded, "must be more than 0"},
	"drain-timeout":      {0, unbounded, "must not be negative (0: wait for running tasks)"},
	"replicas":           {1, 5, "must be 1 to 5 (JetStream's limit)"},
	"limit":              {1, unbounded, "must be at least 1"},
}

// tokenFlags are the flags whose values (comma-separated for --pool) are
// pool or worker names: subject tokens (bus.ValidToken), by flag name or
// "command flag".
var tokenFlags = map[string]bool{"pool": true, "worker name": true}

// checkRanges checks the flags given on the command line against
// flagRanges: a usage error names the first one out of range.
func checkRanges(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err != nil {
			return
		}
		if tokenFlags[f.Name] || tokenFlags[fs.Name()+" "+f.Name] {
			for v := range strings.SplitSeq(f.Value.String(), ",") {
				if v == "" {
					continue
				}
				if terr := bus.ValidToken(v); terr != nil {
					err = usageErrorf("--%s: %v", f.Name, terr)
					return
				}
			}
			return
		}
		r, ok := flagRanges[fs.Name()+" "+f.Name]
		if !ok {
			if r, ok = flagRanges[f.Name]; !ok {
				return
			}
		}
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var n int64
		switch v := g.Get().(type) {
		case time.Duration:
			n = int64(v)
		case int:
			n = int64(v)
		default:
			return
		}
		if n < r.min || n > r.max {
			err = usageErrorf("--%s %s: %s", f.Name, f.Value.String(), r.why)
		}
	})
	return err
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
