package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// progressPrinter prints a line per finished resource and a summary. On a
// terminal (live) it also keeps a status line under them: resources done
// of the total (child runs included), the running ones, failures.
//
// By default only changes, failures and skips get a line (a change with
// its diff under it, see noteworthy); verbose prints every resource.
type progressPrinter struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	noop  bool
	// verbose prints a line for every finished resource.
	verbose bool
	// color paints statuses and diffs with ANSI colours.
	color bool
	// jaegerURL, when set, links the trace in the summary.
	jaegerURL string
	// live redraws the status line; only for terminals.
	live bool

	total, done, failed int
	running             map[string]string // run/task → ref
	order               []string          // running keys, oldest first
}

// isTerminal reports whether w is a terminal that can redraw a line.
func isTerminal(w io.Writer, getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	f, ok := w.(*os.File)
	if !ok || getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// clearLine erases the status line (live only).
const clearLine = "\r\x1b[2K"

func (p *progressPrinter) track(ev bus.Event) {
	if p.running == nil {
		p.running = map[string]string{}
	}
	key := ""
	if ev.Task != nil {
		key = fmt.Sprintf("%s/%d", ev.RunID, *ev.Task)
	}
	switch ev.Kind {
	case bus.EventRunStarted:
		p.total += ev.Total
	case bus.EventTaskDispatched:
		if _, ok := p.running[key]; !ok {
			p.order = append(p.order, key)
		}
		p.running[key] = ev.Ref
	case bus.EventTaskFinished:
		p.done++
		if ev.Outcome == bus.TaskFailed {
			p.failed++
		}
		delete(p.running, key)
		p.order = slices.DeleteFunc(p.order, func(k string) bool { return k == key })
	}
}

// statusLine renders "[3/10] running: file#/a, exec#b (+2 more) | 1 failed".
func (p *progressPrinter) statusLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d/%d]", p.done, p.total)
	if n := len(p.order); n > 0 {
		shown := p.order[:min(n, 3)]
		refs := make([]string, len(shown))
		for i, k := range shown {
			refs[i] = p.running[k]
		}
		fmt.Fprintf(&b, " running: %s", strings.Join(refs, ", "))
		if n > 3 {
			fmt.Fprintf(&b, " (+%d more)", n-3)
		}
	}
	if p.failed > 0 {
		fmt.Fprintf(&b, " | %d failed", p.failed)
	}
	return b.String()
}

func (p *progressPrinter) event(ev bus.Event) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		p.track(ev)
		fmt.Fprint(p.w, clearLine)
		defer func() { fmt.Fprint(p.w, p.statusLine()) }()
	}
	prefix := ""
	if ev.RunID != ev.RootRunID && ev.RootRunID != "" {
		prefix = "[" + ev.Manifest + "] "
	}
	switch ev.Kind {
	case bus.EventTaskFinished:
		if !p.verbose && !noteworthy(ev) {
			return
		}
		status := ev.Status
		if p.noop && ev.Outcome == bus.TaskChanged {
			status = "would change"
		}
		detail := ev.Message
		if ev.Error != "" {
			detail = ev.Error
		}
		detail = firstLine(strings.TrimPrefix(detail, ev.Ref+": "))
		if detail == "" && ev.Outcome == bus.TaskStable {
			detail = "in the desired state"
		}
		timing := ""
		if ev.Worker != "" {
			timing = fmt.Sprintf(" (%dms)", ev.DurationMS)
		}
		fmt.Fprintf(p.w, "%s%s %s: %s%s\n", prefix, p.paint(statusColor(ev.Outcome), fmt.Sprintf("%-12s", status)), ev.Ref, detail, timing)
		if ev.Diff != "" && ev.Outcome != bus.TaskStable {
			writeDiff(p.w, ev.Diff, "    ", p.color)
		}
	case bus.EventRunRejected:
		fmt.Fprintf(p.w, "%srun %s rejected:\n%s\n", prefix, ev.RunID, ev.Error)
	}
}

// noteworthy reports whether a finished resource gets a line without
// --verbose: it changed (or would), failed or was skipped, or a health
// check of it was not OK, or only its health checks ran.
func noteworthy(ev bus.Event) bool {
	if ev.Outcome != bus.TaskStable {
		return true
	}
	return strings.HasPrefix(ev.Message, "health-check-only:") || strings.Contains(ev.Message, "; health checks: ")
}

func (p *progressPrinter) summary(rep *coordinator.Report) {
	if p.live {
		fmt.Fprint(p.w, clearLine)
	}
	printRecap(p.w, rep, p.color)
	c := rep.Counts
	changed := "changed"
	if rep.Noop {
		changed = "would change"
	}
	fmt.Fprintf(p.w, "run %s %s in %s: %d resources, %d %s, %d stable, %d failed, %d skipped\n",
		rep.RunID, rep.Status, fmtMS(rep.DurationMS), c.Total, c.Changed, changed, c.Stable, c.Failed, c.Skipped)
	printTrace(p.w, rep.TraceID, p.jaegerURL)
}

func fmtMS(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%dms", ms)
	}
	return fmt.Sprintf("%.1fs", float64(ms)/1000)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
