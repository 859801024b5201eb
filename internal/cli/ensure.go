package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

const ensureAbout = `Manages one resource ad hoc, as CCM's 'ccm ensure': builds a manifest of
the resource TYPE NAME with the properties given, validates it against the
same schemas as any manifest and applies it with the embedded engine, like
'manifold apply' (same output, --noop, exit codes).

  manifold ensure file /etc/motd --content "hello" --mode 0644
  manifold ensure package nginx --ensure latest
  manifold ensure exec "systemctl daemon-reload" --set timeout=30s

--content, --mode, --ensure, --owner and --group set those properties;
--set key=value any property (repeatable; a value reading as a YAML number
or boolean is one, anything else is text). Errors name the resource's
fields ("ensure: resources[0].file[0]./etc/motd.mode: ..."). Exit codes: 0 converged, 1 failed, 2 invalid resource or flags,
3 could not run.`

// ensureProps collects --set key=value.
type ensureProps map[string]any

func (p ensureProps) String() string { return "" }

func (p ensureProps) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	p[k] = scalar(v)
	return nil
}

// scalar is v as a YAML bool or number when it reads back as the same
// text (3, true, 1.5), else v: "0644" stays text, not octal 420.
func scalar(v string) any {
	var val any
	if err := yaml.Unmarshal([]byte(v), &val); err != nil {
		return v
	}
	switch x := val.(type) {
	case bool:
		if strconv.FormatBool(x) == v {
			return x
		}
	case int:
		if strconv.Itoa(x) == v {
			return x
		}
	case float64:
		if strconv.FormatFloat(x, 'f', -1, 64) == v {
			return x
		}
	}
	return v
}

// namedProps are the properties with their own flag.
var namedProps = []string{"content", "mode", "ensure", "owner", "group"}

// passedToApply are the apply flags ensure takes.
var passedToApply = map[string]bool{"noop": true, "output": true, "timeout": true, "log-level": true, "concurrency": true}

func runEnsure(ctx context.Context, st IO, args []string) int {
	fs := newFlags("ensure", "[flags] TYPE NAME", ensureAbout, st, args)
	props := ensureProps{}
	named := map[string]*string{}
	for _, n := range namedProps {
		named[n] = fs.String(n, "", "the resource's "+n+" property")
	}
	fs.Var(props, "set", "set a property: key=value, repeatable")
	fs.Bool("noop", false, "report what would change without changing anything")
	fs.Var(&choice{"text", []string{"text", "json"}}, "output", "output format: text or json (the run report)")
	fs.Duration("timeout", defaultEnsureTimeout, "give up on the run after this long (exit 3)")
	fs.Var(&choice{"error", []string{"debug", "info", "warn", "error"}}, "log-level", "log level on stderr: debug, info, warn or error")
	fs.Int("concurrency", 0, "resources executed at once by the embedded worker (default: CPUs)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(st.Stderr, "manifold ensure: want TYPE and NAME arguments")
		fs.Usage()
		return ExitInvalid
	}
	var applyArgs []string
	fs.Visit(func(f *flag.Flag) {
		if p, ok := named[f.Name]; ok {
			props[f.Name] = *p
		}
		if passedToApply[f.Name] {
			applyArgs = append(applyArgs, "--"+f.Name+"="+f.Value.String())
		}
	})
	src, err := yaml.Marshal(map[string]any{
		"ordering":  "graph",
		"resources": []any{map[string]any{pos[0]: []any{map[string]any{pos[1]: map[string]any(props)}}}},
	})
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold ensure: %v\n", err)
		return ExitInvalid
	}
	dir, err := os.MkdirTemp("", "manifold-ensure-")
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold ensure: %v\n", err)
		return ExitUnavailable
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ensure")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		fmt.Fprintf(st.Stderr, "manifold ensure: %v\n", err)
		return ExitUnavailable
	}
	// Problems name the manifest "ensure", not the temporary file.
	st.Stderr = &replaceWriter{w: st.Stderr, old: regexp.MustCompile(regexp.QuoteMeta(path) + `(:\d+)*`), new: "ensure"}
	return runApply(ctx, st, append(applyArgs, "--", path))
}

// defaultEnsureTimeout is apply's default --timeout.
const defaultEnsureTimeout = time.Hour

// replaceWriter writes to w with old replaced by new in each write.
type replaceWriter struct {
	w   io.Writer
	old *regexp.Regexp
	new string
}

func (r *replaceWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.old.ReplaceAllLiteralString(string(p), r.new)); err != nil {
		return 0, err
	}
	return len(p), nil
}
