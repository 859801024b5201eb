package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/manifold-run/manifold/bus"
)

// RunStatus is the state of a run.
type RunStatus string

// Run states: queued → running → succeeded | failed | cancelled.
const (
	RunQueued    RunStatus = "queued"
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Final reports whether the run has ended.
func (s RunStatus) Final() bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// Report is the run report, a documented contract (README, "Run report"):
// scripts read it from `manifold apply --output json` and runs.get.
type Report struct {
	RunID           string    `json:"run_id"`
	Manifest        string    `json:"manifest"`
	Status          RunStatus `json:"status"`
	Noop            bool      `json:"noop"`
	HealthCheckOnly bool      `json:"health_check_only"`
	Depth           int       `json:"depth"`
	DurationMS      int64     `json:"duration_ms"`
	TraceID         string    `json:"trace_id"`
	Counts          Counts    `json:"counts"`
	// Resources in declaration order.
	Resources []ResourceReport `json:"resources"`

	// Extensions of the contract.
	RootRunID   string `json:"root_run_id,omitempty"`
	ParentRunID string `json:"parent_run_id,omitempty"`
	Pool        string `json:"pool,omitempty"`
	// Coordinator is the coordinator driving (or that drove) the run.
	Coordinator string     `json:"coordinator,omitempty"`
	Error       string     `json:"error,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

// Counts sums the resources of a run by status.
type Counts struct {
	Total   int `json:"total"`
	Changed int `json:"changed"`
	Stable  int `json:"stable"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// ResourceReport is one resource's line in the report. Status is changed,
// stable, failed or skipped once the run ended (pending, dispatched or
// running before; cancelled when the run was cancelled). In noop mode
// changed means "would change".
type ResourceReport struct {
	Ref        string  `json:"ref"`
	Type       string  `json:"type"`
	Name       string  `json:"name"`
	Alias      string  `json:"alias"`
	Status     string  `json:"status"`
	Noop       bool    `json:"noop"`
	Refreshed  bool    `json:"refreshed"`
	Message    string  `json:"message"`
	Error      string  `json:"error"`
	DurationMS int64   `json:"duration_ms"`
	Worker     string  `json:"worker"`
	Child      *Report `json:"child"`
	// Extensions.
	Attempts int    `json:"attempts,omitempty"`
	Pool     string `json:"pool,omitempty"`
}

// record is a run's state in the runs bucket, the source of truth from
// which the report is built and a run is resumed.
type record struct {
	V           int            `json:"v"`
	RunID       string         `json:"run_id"`
	RootRunID   string         `json:"root_run_id"`
	ParentRunID string         `json:"parent_run_id,omitempty"`
	ParentTask  int            `json:"parent_task,omitempty"`
	Depth       int            `json:"depth"`
	Request     bus.RunRequest `json:"request"`
	Manifest    string         `json:"manifest"`
	Status      RunStatus      `json:"status"`
	Error       string         `json:"error,omitempty"`
	Owner       string         `json:"owner,omitempty"`
	// LeaseUntil is when the owner's claim on the run lapses unless
	// renewed; after it another coordinator may resume the run.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	TraceID    string    `json:"trace_id,omitempty"`
	// SpanID is the run span's ID, so a resumed run continues the trace.
	SpanID string `json:"span_id,omitempty"`
	// Entry is the manifest's path inside the bundle ("" for an inline
	// manifest).
	Entry string `json:"entry,omitempty"`
	// Chain lists the manifests from the root run to this one.
	Chain []string `json:"chain,omitempty"`
	// ParentAttempt is the attempt of the parent's apply task.
	ParentAttempt int `json:"parent_attempt,omitempty"`
	// ApplyData is the apply resource's data property.
	ApplyData map[string]any `json:"apply_data,omitempty"`
	// ParentNoop is the parent run's noop mode: a child put in noop by
	// its apply resource must not refresh a non-noop parent's subscribers.
	ParentNoop bool `json:"parent_noop,omitempty"`
	// DenyApply is set when the apply resource had allow_apply: false.
	DenyApply bool `json:"deny_apply,omitempty"`
	// MaxDepth is the run tree's depth limit.
	MaxDepth int `json:"max_depth,omitempty"`
	// Session holds the finished resources of the ancestors, by reference
	// (type#name and type#alias), for a child's cross-manifest references.
	Session map[string]sessionRef `json:"session,omitempty"`
	// Stopped is set when fail_on_error stopped dispatching.
	Stopped    bool         `json:"stopped,omitempty"`
	QueuedAt   time.Time    `json:"queued_at"`
	StartedAt  time.Time    `json:"started_at,omitzero"`
	FinishedAt time.Time    `json:"finished_at,omitzero"`
	Tasks      []*taskState `json:"tasks"`
}

type taskState struct {
	Ref        string         `json:"ref"`
	Type       string         `json:"type"`
	Name       string         `json:"name"`
	Alias      string         `json:"alias,omitempty"`
	Pool       string         `json:"pool,omitempty"`
	Status     bus.TaskStatus `json:"status"`
	Attempt    int            `json:"attempt,omitempty"`
	Changed    bool           `json:"changed,omitempty"`
	Refreshed  bool           `json:"refreshed,omitempty"`
	Message    string         `json:"message,omitempty"`
	Error      string         `json:"error,omitempty"`
	DurationMS int64          `json:"duration_ms,omitempty"`
	Worker     string         `json:"worker,omitempty"`
	Deadline   time.Time      `json:"deadline,omitzero"`
	Child      string         `json:"child,omitempty"`
}

// sessionRef is an ancestor's finished resource as a child run sees it.
type sessionRef struct {
	Status  bus.TaskStatus `json:"status"`
	Changed bool           `json:"changed,omitempty"`
}

// loadRecord reads a run record.
func loadRecord(ctx context.Context, runs *bus.Bucket, runID string) (*record, uint64, error) {
	e, err := runs.Get(ctx, runKey(runID))
	if err != nil {
		return nil, 0, err
	}
	var rec record
	if err := json.Unmarshal(e.Value, &rec); err != nil {
		return nil, 0, fmt.Errorf("run %s: corrupt record: %w", runID, err)
	}
	return &rec, e.Revision, nil
}

func runKey(runID string) string { return "run." + runID }

// maxReportDepth bounds recursion when nesting child reports, whatever the
// records say.
const maxReportDepth = 64

// GetReport builds the report of a run from its record, nesting the
// reports of child runs under their apply resources. It returns an error
// wrapping bus.ErrNotFound for an unknown run.
func GetReport(ctx context.Context, b *bus.Bus, runID string) (*Report, error) {
	return getReport(ctx, b.Runs(), runID, 0)
}

func getReport(ctx context.Context, runs *bus.Bucket, runID string, level int) (*Report, error) {
	rec, _, err := loadRecord(ctx, runs, runID)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	rep := rec.report()
	if level >= maxReportDepth {
		return rep, nil
	}
	for i, t := range rec.Tasks {
		if t.Child == "" {
			continue
		}
		child, err := getReport(ctx, runs, t.Child, level+1)
		if err != nil {
			return nil, err
		}
		rep.Resources[i].Child = child
	}
	return rep, nil
}

// report renders the record as a report without child reports.
func (rec *record) report() *Report {
	rep := &Report{
		RunID:           rec.RunID,
		Manifest:        rec.Manifest,
		Status:          rec.Status,
		Noop:            rec.Request.Noop,
		HealthCheckOnly: rec.Request.HealthCheckOnly,
		Depth:           rec.Depth,
		TraceID:         rec.TraceID,
		RootRunID:       rec.RootRunID,
		ParentRunID:     rec.ParentRunID,
		Pool:            rec.Request.Pool,
		Coordinator:     rec.Owner,
		Error:           rec.Error,
		Resources:       make([]ResourceReport, 0, len(rec.Tasks)),
	}
	if !rec.StartedAt.IsZero() {
		t := rec.StartedAt
		rep.StartedAt = &t
		end := rec.FinishedAt
		if end.IsZero() {
			end = time.Now()
		} else {
			rep.FinishedAt = &rec.FinishedAt
		}
		rep.DurationMS = end.Sub(rec.StartedAt).Milliseconds()
	}
	for _, t := range rec.Tasks {
		rep.Counts.Total++
		switch t.Status {
		case bus.TaskChanged:
			rep.Counts.Changed++
		case bus.TaskStable:
			rep.Counts.Stable++
		case bus.TaskFailed:
			rep.Counts.Failed++
		case bus.TaskSkipped, bus.TaskCancelled:
			rep.Counts.Skipped++
		}
		rep.Resources = append(rep.Resources, ResourceReport{
			Ref: t.Ref, Type: t.Type, Name: t.Name, Alias: t.Alias, Status: string(t.Status),
			Noop: rec.Request.Noop, Refreshed: t.Refreshed, Message: t.Message, Error: t.Error,
			DurationMS: t.DurationMS, Worker: t.Worker, Attempts: t.Attempt, Pool: t.Pool,
		})
	}
	return rep
}
