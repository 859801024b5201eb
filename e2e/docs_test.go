package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The documentation test: every shell block of README.md and docs/ is run
// against the binary built from the checkout, and every relative link is
// checked. The conventions are in docs/README.md ("Every command here is
// run by a test").

const (
	// docsBlockTimeout bounds one block, background processes included.
	docsBlockTimeout = 60 * time.Second
	// docsStopTimeout bounds the stop of a block's background processes
	// (a worker drains its running tasks first).
	docsStopTimeout = 20 * time.Second
	// docsUnmarkedTimeout bounds an unmarked block of docsPagesOfOthers,
	// whose failure is only logged (a block that starts a server with &
	// would hold the test for the whole docsBlockTimeout).
	docsUnmarkedTimeout = 15 * time.Second
	// docsCompileTimeout bounds a block that compiles (go run, go install,
	// go build): linking the binary takes seconds on an idle machine and
	// a minute on a loaded one.
	docsCompileTimeout = 3 * time.Minute
	// docsReadyTimeout bounds the wait for a server, a coordinator and
	// workers to be ready.
	docsReadyTimeout = 30 * time.Second
	// docsMarker starts the HTML comment that marks a block.
	docsMarker = "<!-- docs-test:"
	// docNATSInstall installs the nats CLI the blocks are checked with
	// (.ci/run does).
	docNATSInstall = "go install github.com/nats-io/natscli/nats@v0.5.1"
	// docNoPeers is what a coordinator started before its cluster formed
	// says when it exits.
	docNoPeers = "no suitable peers for placement"
)

// docsPagesOfOthers are the pages other engineers were writing while the
// README was split: their unmarked blocks are run, but a failure is only
// logged until the page adopts the markers of docs/README.md. Remove a
// page from the list once it does.
var docsPagesOfOthers = map[string]bool{
	"docs/offline.md": true, "docs/converge.md": true, "docs/fleet.md": true, "docs/fleet-view.md": true,
	"docs/registration.md": true, "docs/output.md": true, "docs/graph.md": true, "docs/ui.md": true,
	"docs/performance-notes.md": true,
}

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	file string // relative to the module root
	line int    // of the opening fence
	lang string
	body string
	// mode is the marker's word: "", "cwd=repo", "server", "terminals",
	// "manifest" or "skip"; reason is the rest of a skip marker.
	mode, reason string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// docFiles lists README.md and every Markdown file under docs/, relative
// to the module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(moduleRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(moduleRoot, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// parseDocBlocks returns the fenced blocks of a Markdown text. A marker
// is an HTML comment on the last non-blank line before the fence.
func parseDocBlocks(file, text string) ([]docBlock, error) {
	var (
		blocks []docBlock
		cur    *docBlock
		body   []string
		prev   string // last non-blank line outside a block
	)
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				cur.body = strings.Join(body, "\n") + "\n"
				blocks = append(blocks, *cur)
				cur, body, prev = nil, nil, ""
				continue
			}
			body = append(body, line)
			continue
		}
		if strings.HasPrefix(trimmed, "```") {
			cur = &docBlock{file: file, line: i + 1, lang: strings.TrimPrefix(trimmed, "```")}
			if m, ok := strings.CutPrefix(prev, docsMarker); ok {
				m, ok = strings.CutSuffix(m, "-->")
				if !ok {
					return nil, fmt.Errorf("%s:%d: marker not closed on its line: %s", file, i, prev)
				}
				cur.mode, cur.reason, _ = strings.Cut(strings.TrimSpace(m), " ")
				switch cur.mode {
				case "cwd=repo", "server", "terminals", "manifest":
				case "skip":
					if cur.reason == "" {
						return nil, fmt.Errorf("%s:%d: a skip marker needs a reason", file, i)
					}
				default:
					return nil, fmt.Errorf("%s:%d: unknown docs-test marker %q", file, i, cur.mode)
				}
			} else if strings.Contains(prev, docsMarker) {
				return nil, fmt.Errorf("%s:%d: a docs-test marker must be the whole line: %s", file, i, prev)
			}
			continue
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block not closed", file, cur.line)
	}
	return blocks, nil
}

// docCommands returns the commands of a shell block: the lines starting
// with "$ " (and their continuation lines) when there are any, else
// every line.
func docCommands(body string) string {
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "$ ") }) {
		return body
	}
	var out []string
	cont := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "$ "):
			out = append(out, strings.TrimPrefix(l, "$ "))
		case cont:
			out = append(out, l)
		default:
			continue
		}
		cont = strings.HasSuffix(l, "\\")
	}
	return strings.Join(out, "\n") + "\n"
}

// docLines joins continuation lines and drops blank and comment lines.
func docLines(script string) []string {
	var out []string
	var cur strings.Builder
	for _, l := range strings.Split(script, "\n") {
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s)
			continue
		}
		cur.WriteString(l)
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

var (
	// docPortRE finds a loopback address with a port.
	docPortRE = regexp.MustCompile(`(127\.0\.0\.1|localhost):(\d{2,5})\b`)
	// docStoreRE finds a store directory under /tmp.
	docStoreRE = regexp.MustCompile(`--store-dir /tmp/`)
	// docNATSRE finds a call of the nats CLI.
	docNATSRE = regexp.MustCompile(`(?m)(^|[;&|(]\s*|\$\(|\s)nats\s+(-|[a-z])`)
	// docGoBuildRE finds a command that compiles.
	docGoBuildRE = regexp.MustCompile(`(?m)(^|[;&|]\s*)go (run|install|build)\b`)
	// docGoTestRE finds a call of go test.
	docGoTestRE = regexp.MustCompile(`(?m)(^|[;&|]\s*)go test\b`)
	// docLongRE finds the commands that run until signalled.
	docLongRE = regexp.MustCompile(`^manifold (server|coordinator|worker)\b`)
)

// freePort returns a TCP port of the loopback interface nobody listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// rewriteDocPorts gives every loopback port of script a free port (the
// same port for every mention of one), and moves store directories under
// root.
func rewriteDocPorts(t *testing.T, script, root string) string {
	t.Helper()
	ports := map[string]string{}
	script = docPortRE.ReplaceAllStringFunc(script, func(s string) string {
		m := docPortRE.FindStringSubmatch(s)
		p, ok := ports[m[2]]
		if !ok {
			p = freePort(t)
			ports[m[2]] = p
		}
		return m[1] + ":" + p
	})
	return docStoreRE.ReplaceAllString(script, "--store-dir "+filepath.Join(root, "tmp")+"/")
}

// docsEnv is the environment of one block: a fresh HOME and everything a
// command reads from it under root, the Go caches of the test's own
// environment (a new HOME must not mean a cold build cache), and PATH
// starting with GOBIN, the built binary and the nats CLI.
type docsEnv struct {
	root string
	env  []string
}

func newDocsEnv(t *testing.T, goEnv map[string]string, natsDir string) docsEnv {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	for _, d := range []string{home, filepath.Join(root, "tmp"), filepath.Join(root, "gobin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := []string{filepath.Join(root, "gobin"), filepath.Dir(manifoldBin)}
	if natsDir != "" {
		path = append(path, natsDir)
	}
	path = append(path, os.Getenv("PATH"))
	set := map[string]string{
		"HOME":                 home,
		"XDG_CONFIG_HOME":      filepath.Join(home, ".config"),
		"XDG_STATE_HOME":       filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME":       filepath.Join(home, ".cache"),
		"TMPDIR":               filepath.Join(root, "tmp"),
		"MANIFOLD_CREDENTIALS": filepath.Join(home, ".config", "manifold", "credentials"),
		"MANIFOLD_STATE_DIR":   filepath.Join(root, "state"),
		"GOBIN":                filepath.Join(root, "gobin"),
		"GOCACHE":              goEnv["GOCACHE"],
		"GOMODCACHE":           goEnv["GOMODCACHE"],
		"GOPATH":               goEnv["GOPATH"],
		"PATH":                 strings.Join(path, string(os.PathListSeparator)),
		"NO_COLOR":             "1",
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok || strings.HasPrefix(k, "MANIFOLD_") || strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "NATS_") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return docsEnv{root: root, env: env}
}

// syncBuffer is a bytes.Buffer safe for a process's output and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// grew is signalled (without blocking) on every write.
	grew chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{grew: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.grew <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// errDocProcExited says a process ended while it was waited for.
var errDocProcExited = errors.New("the process exited")

// waitFor waits until the buffer holds s, or ctx ends, or done is closed
// (errDocProcExited).
func (b *syncBuffer) waitFor(ctx context.Context, done <-chan struct{}, s string) error {
	for !strings.Contains(b.String(), s) {
		select {
		case <-b.grew:
		case <-done:
			if strings.Contains(b.String(), s) {
				return nil
			}
			return fmt.Errorf("waiting for %q: %w", s, errDocProcExited)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %q: %w", s, ctx.Err())
		}
	}
	return nil
}

// docProc is a background process of a block (a terminal left running).
type docProc struct {
	line string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

func (p *docProc) String() string { return fmt.Sprintf("$ %s\n%s", p.line, p.out) }

// bash returns a command running script with bash -e -o pipefail in the
// block's environment, working directory the module root, in a process
// group of its own (so a signal reaches everything it started).
func (e docsEnv) bash(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = moduleRoot
	cmd.Env = e.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// start starts a background line.
func (e docsEnv) start(t *testing.T, line string) *docProc {
	t.Helper()
	p := &docProc{line: line, out: newSyncBuffer(), done: make(chan struct{})}
	p.cmd = e.bash(context.Background(), "exec "+line)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", line, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and waits for the process to exit.
func (p *docProc) stop(ctx context.Context) error {
	select {
	case <-p.done:
		return fmt.Errorf("exited before it was stopped: %v\n%s", p.err, p)
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("did not exit after SIGTERM: %w\n%s", ctx.Err(), p)
	}
	if p.err != nil {
		return fmt.Errorf("exited with %v after SIGTERM\n%s", p.err, p)
	}
	return nil
}

// flagValue returns the value of --flag in a command line.
func flagValue(line, flag string) string {
	f := strings.Fields(line)
	for i, w := range f {
		if w == flag && i+1 < len(f) {
			return f[i+1]
		}
		if v, ok := strings.CutPrefix(w, flag+"="); ok {
			return v
		}
	}
	return ""
}

// startTerminals starts the long-running lines of a block, each in its
// own process, and waits until every server listens and every coordinator
// and worker says it started (their "coordinator started" and "worker
// started" log lines, at the default log level). Lines after the first
// server have MANIFOLD_SERVER and NATS_URL set to it, as a user's commands
// reach the default server. It returns the processes, the other lines in order, and
// the first server's URL.
func (e docsEnv) startTerminals(t *testing.T, ctx context.Context, lines []string) ([]*docProc, []string, string, error) {
	t.Helper()
	var (
		procs     []*docProc
		rest      []string
		serverURL string
	)
	ready, cancel := context.WithTimeout(ctx, docsReadyTimeout)
	defer cancel()
	started := map[*docProc]string{}
	for _, line := range lines {
		m := docLongRE.FindStringSubmatch(line)
		if m == nil {
			rest = append(rest, line)
			continue
		}
		p := e.start(t, line)
		procs = append(procs, p)
		if m[1] != "server" {
			started[p] = m[1] + " started"
			continue
		}
		if err := p.out.waitFor(ready, p.done, "listening on"); err != nil {
			return procs, nil, "", fmt.Errorf("%w\n%s", err, p)
		}
		if serverURL == "" {
			serverURL = "nats://" + cmpOr(flagValue(line, "--listen"), "127.0.0.1:4222")
			e.env = append(slices.Clone(e.env), "MANIFOLD_SERVER="+serverURL, "NATS_URL="+serverURL)
		}
	}
	for i, p := range procs {
		s, ok := started[p]
		for ok {
			err := p.out.waitFor(ready, p.done, s)
			if err == nil {
				break
			}
			// A coordinator started before a new cluster elected its
			// JetStream leader cannot place its streams and exits 3;
			// docs/distributed.md tells the user to start it again.
			if !errors.Is(err, errDocProcExited) || !strings.Contains(p.out.String(), docNoPeers) {
				return procs, nil, "", fmt.Errorf("%w\n%s", err, procsOutput(procs))
			}
			t.Logf("%s: %s; starting it again", p.line, docNoPeers)
			p = e.start(t, p.line)
			procs[i] = p
		}
	}
	return procs, rest, serverURL, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func procsOutput(procs []*docProc) string {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "--- %s\n", p)
	}
	return b.String()
}

// stopAll stops the background processes in reverse order of start
// (workers and coordinators before the server they use).
func stopAll(ctx context.Context, procs []*docProc) error {
	var errs []string
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].stop(ctx); err != nil {
			errs = append(errs, procs[i].line+": "+err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// runDocBlock runs one shell block as docs/README.md says. fail reports
// a failure: t.Errorf, or t.Logf for a page whose owner has not marked its
// blocks yet (docsPagesOfOthers).
func runDocBlock(t *testing.T, b docBlock, e docsEnv, timeout time.Duration, fail func(format string, args ...any)) {
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	script := rewriteDocPorts(t, docCommands(b.body), e.root)
	var procs []*docProc
	switch b.mode {
	case "terminals":
		rest, url, err := []string(nil), "", error(nil)
		procs, rest, url, err = e.startTerminals(t, ctx, docLines(script))
		if err != nil {
			fail("%s: %v", b, err)
			return
		}
		script = strings.Join(rest, "\n") + "\n"
		if url != "" {
			e.env = append(slices.Clone(e.env), "MANIFOLD_SERVER="+url, "NATS_URL="+url)
		}
	case "server":
		port := freePort(t)
		var err error
		procs, _, _, err = e.startTerminals(t, ctx, []string{
			"manifold server --listen 127.0.0.1:" + port + " --store-dir " + filepath.Join(e.root, "js"),
			"manifold coordinator --server nats://127.0.0.1:" + port,
			"manifold worker --server nats://127.0.0.1:" + port + " --name w1 --pool default --concurrency 4",
		})
		if err != nil {
			fail("%s: starting the quick start's processes: %v", b, err)
			return
		}
		// The server stands at the address commands default to: a nats
		// command without --context reaches it as it would on 4222, and
		// is refused (Authorization Violation).
		e.env = append(slices.Clone(e.env), "MANIFOLD_SERVER=nats://127.0.0.1:"+port, "NATS_URL=nats://127.0.0.1:"+port)
	}
	start := time.Now()
	out, err := e.bash(ctx, script).CombinedOutput()
	t.Logf("%s: ran in %s:\n%s\n%s", b, time.Since(start).Round(time.Millisecond), script, out)
	if err != nil {
		fail("%s: %v\n--- script:\n%s--- output:\n%s%s", b, err, script, out, procsOutput(procs))
	}
	// Stopping gets its own deadline: a block that ran out of time must
	// still show whether its processes stop.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(t.Context()), docsStopTimeout)
	defer scancel()
	if err := stopAll(sctx, procs); err != nil {
		fail("%s: %v", b, err)
	}
}

// validateDocManifest checks a block marked as a whole manifest.
func validateDocManifest(t *testing.T, b docBlock, e docsEnv) {
	ext := map[string]string{"yaml": ".yaml", "yml": ".yaml", "json": ".json", "cue": ".cue"}[b.lang]
	if ext == "" {
		t.Fatalf("%s: a manifest block must be yaml, json or cue, not %q", b, b.lang)
	}
	path := filepath.Join(e.root, "manifest"+ext)
	if err := os.WriteFile(path, []byte(b.body), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.bash(t.Context(), "manifold validate "+path).CombinedOutput()
	if err != nil {
		t.Errorf("%s: the manifest does not validate: %v\n%s", b, err, out)
	}
}

// TestDocs runs the commands of README.md and docs/ and checks their
// links.
func TestDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs servers and every documented command")
	}
	goEnv := map[string]string{}
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		goEnv[[]string{"GOCACHE", "GOMODCACHE", "GOPATH"}[i]] = v
	}
	natsDir := ""
	if p, err := exec.LookPath("nats"); err == nil {
		natsDir = filepath.Dir(p)
	}

	var blocks []docBlock
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(moduleRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := parseDocBlocks(f, string(text))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, bs...)
	}
	skipped := map[string][]string{}
	ran := 0
	for _, b := range blocks {
		isShell := b.lang == "sh" || b.lang == "bash"
		switch {
		case b.mode == "skip":
			skipped[b.reason] = append(skipped[b.reason], b.String())
			continue
		case b.mode == "manifest":
		case !isShell:
			continue
		case b.mode == "" && docGoTestRE.MatchString(docCommands(b.body)):
			r := "runs go test (the suite itself, or a benchmark): not run inside the suite"
			skipped[r] = append(skipped[r], b.String())
			continue
		case natsDir == "" && docNATSRE.MatchString(docCommands(b.body)):
			if os.Getenv("MANIFOLD_DOCS_NATS") == "required" {
				t.Errorf("%s: calls the nats CLI, which is not on PATH (MANIFOLD_DOCS_NATS=required): %s", b, docNATSInstall)
				continue
			}
			r := "the nats CLI is not on PATH (" + docNATSInstall + ")"
			skipped[r] = append(skipped[r], b.String())
			continue
		}
		ran++
		t.Run(strings.ReplaceAll(b.String(), "/", "_"), func(t *testing.T) {
			e := newDocsEnv(t, goEnv, natsDir)
			if b.mode == "manifest" {
				validateDocManifest(t, b, e)
				return
			}
			fail, timeout := t.Errorf, docsBlockTimeout
			if docGoBuildRE.MatchString(docCommands(b.body)) {
				timeout = docsCompileTimeout
			}
			if b.mode == "" && docsPagesOfOthers[b.file] {
				timeout = docsUnmarkedTimeout
				fail = func(format string, args ...any) {
					t.Logf("NOT MARKED YET (%s is its owner's; a failure is logged, not an error, until the page marks its blocks): "+format,
						append([]any{b.file}, args...)...)
				}
			}
			runDocBlock(t, b, e, timeout, fail)
		})
	}
	n := 0
	for r, where := range skipped {
		n += len(where)
		t.Logf("skipped %d block(s): %s: %s", len(where), r, strings.Join(where, ", "))
	}
	t.Logf("%d blocks to run, %d skipped", ran, n)
}

// docLinkRE finds Markdown links.
var docLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// docAnchors returns the GitHub anchors of a Markdown text's headings.
func docAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	fence := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		anchors[b.String()] = true
	}
	return anchors
}

// TestDocsLinks checks that every relative link of README.md and docs/
// names a file of the repository, and every anchor a heading of its page.
// Pages other engineers are still writing (docsPagesOfOthers) may be
// linked before they land.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(moduleRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docLinkRE.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Clean(filepath.Join(filepath.Dir(f), path))
			}
			data, err := os.ReadFile(filepath.Join(moduleRoot, file))
			if err != nil {
				if _, serr := os.Stat(filepath.Join(moduleRoot, file)); serr == nil {
					continue // a directory
				}
				if docsPagesOfOthers[file] {
					t.Logf("%s: link to %s: not written yet", f, target)
					continue
				}
				t.Errorf("%s: link to %s: %v", f, target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !docAnchors(string(data))[anchor] {
				t.Errorf("%s: link to %s: no heading with anchor #%s in %s", f, target, anchor, file)
			}
		}
	}
}

// TestDocsCommands checks that every command `manifold --help` lists is
// shown, as "manifold COMMAND", in the README or a page of docs/.
func TestDocsCommands(t *testing.T) {
	t.Parallel()
	r := run(t, "--help")
	wantCode(t, r, 0)
	_, list, ok := strings.Cut(r.stdout+r.stderr, "Commands:\n")
	if !ok {
		t.Fatalf("no Commands: section in manifold --help:\n%s", r)
	}
	list, _, _ = strings.Cut(list, "\n\n")
	var all strings.Builder
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(filepath.Join(moduleRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(text)
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n++
		if !regexp.MustCompile(`manifold ` + regexp.QuoteMeta(f[0]) + `\b`).MatchString(all.String()) {
			t.Errorf("manifold %s (in manifold --help) is shown nowhere in README.md or docs/", f[0])
		}
	}
	if n < 10 {
		t.Fatalf("found only %d commands in manifold --help:\n%s", n, list)
	}
}
