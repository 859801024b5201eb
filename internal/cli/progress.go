package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// progressPrinter prints a line per finished resource and a summary.
type progressPrinter struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	noop  bool
	// jaegerURL, when set, links the trace in the summary.
	jaegerURL string
}

func (p *progressPrinter) event(ev bus.Event) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prefix := ""
	if ev.RunID != ev.RootRunID && ev.RootRunID != "" {
		prefix = "[" + ev.Manifest + "] "
	}
	switch ev.Kind {
	case bus.EventTaskFinished:
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
		fmt.Fprintf(p.w, "%s%-12s %s: %s%s\n", prefix, status, ev.Ref, detail, timing)
	case bus.EventRunRejected:
		fmt.Fprintf(p.w, "%srun %s rejected:\n%s\n", prefix, ev.RunID, ev.Error)
	}
}

func (p *progressPrinter) summary(rep *coordinator.Report) {
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
