package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/internal/facts"
	"github.com/manifold-run/manifold/internal/hiera"
	"github.com/manifold-run/manifold/schemas"
)

// MaxDataFileBytes bounds one --data-file: 4 MiB.
const MaxDataFileBytes = 4 << 20

// DefaultFactsDir is where custom facts are read from unless --facts-dir
// says otherwise: facts.json, facts.yaml and facts.d/*. Unlike a directory
// the user names, it may be unreadable (a root-only /etc/manifold, read
// by another user): a warning, not an error.
const DefaultFactsDir = "/etc/manifold"

// defaultFactsDir is DefaultFactsDir; tests point it elsewhere.
var defaultFactsDir = DefaultFactsDir

// factsDirFlag is --facts-dir: the directory, and whether the user named
// it (an unreadable default is a warning, a named one an error).
type factsDirFlag struct {
	path  string
	named bool
}

func (f *factsDirFlag) String() string {
	if f == nil || (!f.named && f.path == "") {
		return defaultFactsDir
	}
	return f.path
}

func (f *factsDirFlag) Set(s string) error { f.path, f.named = s, true; return nil }

// dir returns the directory to read.
func (f *factsDirFlag) dir() string {
	if f.named {
		return f.path
	}
	return defaultFactsDir
}

// compileFlags are the flags that feed the compile path: the run's data
// (--data, --data-file, alias --hiera) and the facts the hierarchy is
// resolved over (--fact, --facts-dir).
type compileFlags struct {
	data      dataFlags
	dataFiles stringList
	// hiera are --hiera sources: hiera documents resolved over the facts.
	hiera    stringList
	facts    stringList
	factsDir factsDirFlag
	// hieraKV reads kv:// hiera sources; nil without a connection.
	hieraKV func(ctx context.Context, bucket, key string) ([]byte, bool, error)
	// warn receives what gathering facts skipped (a FIFO in facts.d, an
	// unreadable default --facts-dir). Nil ignores it.
	warn func(error)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return fmt.Sprint([]string(*l)) }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

func (c *compileFlags) register(fs *flag.FlagSet, dataUsage string) {
	c.data = dataFlags{}
	fs.Var(c.data, "data", dataUsage)
	fs.Var(&c.dataFiles, "data-file", "run data from a YAML or JSON file (a map), repeatable; merged before --data, both over the manifest's data")
	fs.Var(&c.hiera, "hiera", "a hiera document (data, hierarchy, overrides, as CCM): a path, kv://BUCKET/KEY (needs --server or --context) or https://URL; resolved over the facts the manifest's hierarchy sees and merged over the manifest's data, before --data-file and --data; repeatable")
	c.registerFacts(fs)
}

// registerFacts registers --fact and --facts-dir.
func (c *compileFlags) registerFacts(fs *flag.FlagSet) {
	fs.Var(&c.facts, "fact", "a fact, key=value, repeatable: dotted keys nest, values are YAML scalars; wins over gathered facts")
	fs.Var(&c.factsDir, "facts-dir", "directory of custom facts: facts.json, facts.yaml, facts.d/*.json|yaml (default "+DefaultFactsDir+"; unreadable: a warning unless named)")
}

// runData is the run's data: each --data-file in order, then --data, each
// merged over the previous (maps key by key, anything else replaced).
func (c *compileFlags) runData() (map[string]any, error) {
	var out map[string]any
	for _, f := range c.dataFiles {
		m, err := readDataFile(f)
		if err != nil {
			return nil, err
		}
		out = compile.MergeData(out, m)
	}
	if len(c.dataFiles) == 0 {
		return c.data, nil
	}
	return compile.MergeData(out, c.data), nil
}

// readDataFile reads one --data-file: a YAML (or JSON) map, at most
// MaxDataFileBytes.
func readDataFile(name string) (map[string]any, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("--data-file: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxDataFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--data-file %s: %w", name, err)
	}
	if len(src) > MaxDataFileBytes {
		return nil, fmt.Errorf("--data-file %s: larger than the limit of %d bytes (%d MiB)", name, MaxDataFileBytes, MaxDataFileBytes>>20)
	}
	var m map[string]any
	if err := yaml.Unmarshal(src, &m); err != nil {
		return nil, fmt.Errorf("--data-file %s: want a YAML or JSON map: %w", name, err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// gatherFacts returns this host's facts: system facts when system is set,
// custom facts from --facts-dir, then --fact, which always win.
func (c *compileFlags) gatherFacts(ctx context.Context, system bool) (map[string]any, error) {
	return facts.Gather(ctx, facts.Opts{Dir: c.factsDir.dir(), DirOptional: !c.factsDir.named, Warn: c.warn, Overrides: c.facts, NoSystem: !system})
}

// runFacts are the facts a run request carries for a remote run: only
// --fact (the coordinator resolves the hierarchy with them; the host that
// runs a task is not known yet). Nil without --fact.
func (c *compileFlags) runFacts() (map[string]any, error) {
	if len(c.facts) == 0 {
		return nil, nil
	}
	f, err := hiera.ParseAssignments(c.facts)
	if err != nil {
		return nil, fmt.Errorf("--fact: %w", err)
	}
	return f, nil
}

// inputs returns the run's data and the facts for compiling, printing a
// bad flag value as a usage error.
func (c *compileFlags) inputs(ctx context.Context, st IO, cmd string, system bool) (map[string]any, map[string]any, bool) {
	c.warnTo(st, cmd)
	data, err := c.runData()
	if err == nil {
		var f map[string]any
		if f, err = c.gatherFacts(ctx, system); err == nil {
			if data, err = c.withHiera(ctx, data, f, system); err == nil {
				return data, f, true
			}
		}
	}
	fmt.Fprintf(st.Stderr, "manifold %s: %v\n", cmd, err)
	return nil, nil, false
}

// inputsLater is inputs for this host without --hiera, the facts gathered
// in the background: the returned func waits for them (and gives the
// same facts and error each time; called from one goroutine). A caller
// compiles meanwhile (compile.Opts.FactsLater): the facts are first
// needed once the manifest is parsed. onGathered, when set, is called
// in the background once they are (or failed to be). false: the run's
// data could not be read (said on st.Stderr).
func (c *compileFlags) inputsLater(ctx context.Context, st IO, cmd string, onGathered func()) (map[string]any, func() (map[string]any, error), bool) {
	c.warnTo(st, cmd)
	data, err := c.runData()
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold %s: %v\n", cmd, err)
		return nil, nil, false
	}
	type gathered struct {
		facts map[string]any
		err   error
	}
	done := make(chan gathered, 1)
	go func() {
		f, err := c.gatherFacts(ctx, true)
		if onGathered != nil {
			onGathered()
		}
		done <- gathered{f, err}
	}()
	var g gathered
	waited := false
	return data, func() (map[string]any, error) {
		if !waited {
			g, waited = <-done, true
		}
		return g.facts, g.err
	}, true
}

// hieraHTTPClient fetches https:// hiera sources; nil: a default client
// (tests give their server's).
var hieraHTTPClient *http.Client

// withHiera resolves each --hiera document and merges the results, in
// order, under data (--data-file and --data win). The hierarchy sees the
// facts the manifest's does: this host's (system set), else --fact only
// (a remote run).
func (c *compileFlags) withHiera(ctx context.Context, data, hostFacts map[string]any, system bool) (map[string]any, error) {
	if len(c.hiera) == 0 {
		return data, nil
	}
	f := hostFacts
	if !system {
		var err error
		if f, err = c.runFacts(); err != nil {
			return nil, err
		}
	}
	var out map[string]any
	for _, src := range c.hiera {
		raw, err := hiera.FetchSource(ctx, src, hiera.SourceOpts{HTTPClient: hieraHTTPClient, KV: c.hieraKV})
		if err != nil {
			return nil, fmt.Errorf("--hiera: %w", err)
		}
		doc, err := hiera.ParseDocument(redacted(src), raw)
		if err != nil {
			return nil, fmt.Errorf("--hiera: %w", err)
		}
		resolved, err := doc.Resolve(f)
		if err != nil {
			return nil, fmt.Errorf("--hiera %s: %w", redacted(src), err)
		}
		out = compile.MergeData(out, resolved)
	}
	return compile.MergeData(out, data), nil
}

// redacted is a source without its password.
func redacted(src string) string {
	if u, err := url.Parse(src); err == nil && u.User != nil {
		return u.Redacted()
	}
	return src
}

// kvFrom makes --hiera kv:// sources read the buckets of the bus conn
// connects to.
func (c *compileFlags) kvFrom(st IO, conn *connFlags) {
	c.hieraKV = func(ctx context.Context, bucket, key string) ([]byte, bool, error) {
		b, err := conn.attach(ctx, st, "manifold-hiera")
		if err != nil {
			return nil, false, err
		}
		defer b.Conn().Close()
		kv, err := b.DocumentKV(ctx, bucket)
		if err != nil {
			return nil, false, err
		}
		v, _, found, err := kv.Get(ctx, key)
		return v, found, err
	}
}

// warnTo prints what gathering facts skips as warnings of cmd on stderr.
func (c *compileFlags) warnTo(st IO, cmd string) {
	c.warn = func(err error) { fmt.Fprintf(st.Stderr, "manifold %s: warning: %v\n", cmd, err) }
}

// compileTree compiles the manifest at path and the manifests it applies
// (compile.Build), printing every problem; false means exit 2.
func compileTree(st IO, cmd, path string, data, facts map[string]any) (*compile.Tree, bool) {
	return compileTreeOpts(st, cmd, path, compile.Opts{Run: data, Facts: facts})
}

// compileTreeOpts is compileTree with all of compile's options: PerHost
// for a fan-out or an assignment, which each host compiles again with its
// own facts.
func compileTreeOpts(st IO, cmd, path string, o compile.Opts) (*compile.Tree, bool) {
	t, err := compile.Build(path, o)
	return reportTree(st, cmd, t, err)
}

// reportTree prints the problems of a compile.Build; false means exit 2.
func reportTree(st IO, cmd string, t *compile.Tree, err error) (*compile.Tree, bool) {
	if errors.Is(err, compile.ErrInternal) {
		panic(err) // a bug, not an invalid manifest: Run exits 3
	}
	if err != nil {
		var errs schemas.Errors
		if errors.As(err, &errs) {
			printValidation(st.Stderr, err)
		} else {
			fmt.Fprintf(st.Stderr, "manifold %s: %v\n", cmd, err)
		}
		return nil, false
	}
	return t, true
}
