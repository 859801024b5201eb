package ui

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/manifold-run/manifold/internal/graph"
)

var funcs = template.FuncMap{
	"dur":    fmtMS,
	"ago":    ago,
	"when":   when,
	"status": statusClass,
	"repeat": strings.Repeat,
	"legend": graph.Statuses,
	"join":   strings.Join,
}

// fmtMS prints a duration in milliseconds as 850ms, 1.2s or 3m04s.
func fmtMS(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
}

// ago prints how long ago t was, to the second.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

// when prints a time (UTC, to the second); "-" for none.
func when(t any) string {
	switch t := t.(type) {
	case *time.Time:
		if t == nil {
			return "-"
		}
		return when(*t)
	case time.Time:
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	}
	return "-"
}

// statusClass is the CSS class of a status: "status-no-answer".
func statusClass(s any) string {
	return "status-" + strings.ReplaceAll(fmt.Sprint(s), " ", "-")
}
