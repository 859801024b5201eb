package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
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
	// Trigger says why a convergence run ran (start, assign, change,
	// interval, drift, health); Assignment and AssignmentVersion name the
	// assignment it keeps converged. Empty for a run someone asked for.
	Trigger           string `json:"trigger,omitempty"`
	Assignment        string `json:"assignment,omitempty"`
	AssignmentVersion uint64 `json:"assignment_version,omitempty"`
	// Coordinator is the coordinator driving (or that drove) the run.
	Coordinator string     `json:"coordinator,omitempty"`
	Error       string     `json:"error,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	// PreMessage is the manifest's pre_message, rendered; PostMessage its
	// post_message, only once the run succeeded (nothing failed).
	PreMessage  string `json:"pre_message,omitempty"`
	PostMessage string `json:"post_message,omitempty"`
	// Page is set by runs.get when Resources holds part of the run's
	// resources (asked for with offset/limit, or cut to fit one reply).
	Page *ReportPage `json:"page,omitempty"`
	// NoAnswer names the workers of a fan-out (each-worker or where run)
	// that did not finish their child run within the answer timeout; their
	// resources have status "no answer" and count as failed.
	NoAnswer []string `json:"no_answer,omitempty"`
	// Offline marks a convergence run a worker carried out from its
	// cached plan while it could not reach the bus, recorded when it
	// reported it; ReportedBy names that worker. Its outcomes are the
	// worker's claims (no history, task tokens or trace back them).
	Offline    bool   `json:"offline,omitempty"`
	ReportedBy string `json:"reported_by,omitempty"`
}

// ReportPage says which of a run's resources a report holds.
type ReportPage struct {
	// Offset is the index of the first resource held.
	Offset int `json:"offset"`
	// Count is how many are held.
	Count int `json:"count"`
	// Total is how many the run has.
	Total int `json:"total"`
	// NextOffset is the offset to ask for next; absent on the last page.
	NextOffset *int `json:"next_offset,omitempty"`
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
	// HealthChecks are the results of the resource's health checks.
	HealthChecks []bus.HealthCheck `json:"health_checks,omitempty"`
	// ChildRunID is the child run of an apply resource.
	ChildRunID string `json:"child_run_id,omitempty"`
	// Diff shows what changed (in noop: what would change), or for a
	// resource that did not converge what still differs, as the resource
	// type words it (a unified diff for file content) and redacts it
	// (sensitive, not world-readable); cut at resources.MaxDiffBytes with
	// a "[manifold: diff truncated: N more bytes]" line. Absent when there
	// is none.
	Diff string `json:"diff,omitempty"`
}

// record is a run's header in the runs bucket: what the run was asked to
// do, who drives it and how it stands. It is written when the run starts,
// when its owner renews the lease and when it ends; its size does not grow
// with the number of resources (the state of each task is a fold of the
// run's history; the report of a finished run is in the reports store).
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
	// (type#name and type#alias), for a child's cross-manifest references,
	// when it is small; a larger one is stored in the bundles store under
	// SessionRef, so that the header does not grow with the ancestors'
	// resources.
	Session    map[string]sessionRef `json:"session,omitempty"`
	SessionRef string                `json:"session_ref,omitempty"`
	// Secret is the run's secret (bus.RunSecretSize random bytes, made
	// when the run is accepted): task tokens derive from it and facts of
	// the run's history are verified with it (verifyFact). Workers cannot
	// read run headers. Empty in runs of earlier versions.
	Secret []byte `json:"secret,omitempty"`
	// Spread is, for a run in graph ordering, how many task messages its
	// ready resources are shared among (machine.spread), chosen when it
	// started; 0 sends one resource per task.
	Spread int `json:"spread,omitempty"`
	// FanOut are the workers of an each-worker run, chosen when it started.
	FanOut []string `json:"fan_out,omitempty"`
	// Counts sum the run's resources by status, as of the last write.
	Counts     Counts    `json:"counts"`
	QueuedAt   time.Time `json:"queued_at"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
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
	if err := decodeRecord(e.Value, &rec); err != nil {
		return nil, 0, fmt.Errorf("run %s: corrupt record: %w", runID, err)
	}
	return &rec, e.Revision, nil
}

func runKey(runID string) string { return "run." + runID }

// maxReportDepth bounds recursion when nesting child reports, whatever the
// records say.
const maxReportDepth = 64

// bundleOpener opens a bundle by reference.
type bundleOpener func(ctx context.Context, ref string) (*bundle.Bundle, error)

// GetReport builds the report of a run, nesting the reports of child runs
// under their apply resources: a finished run's from the reports store, a
// running one's by folding its history over its plan. It returns an error
// wrapping bus.ErrNotFound for an unknown run.
func GetReport(ctx context.Context, b *bus.Bus, runID string) (*Report, error) {
	return getReport(ctx, b, runID, 0)
}

func getReport(ctx context.Context, b *bus.Bus, runID string, level int) (*Report, error) {
	rec, _, err := loadRecord(ctx, b.Runs(), runID)
	if errors.Is(err, bus.ErrNotFound) {
		// A fan-out's child folded into its fan-out's report (fold.go).
		if rep, ferr := foldedReport(ctx, b, runID, 0); ferr == nil {
			return rep, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	rep, err := runReport(ctx, b, rec)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	if level >= maxReportDepth {
		return rep, nil
	}
	// Children are read side by side: a fan-out has one per host, each
	// a record and a stored report away (three round trips or more), and
	// read one after another 1,000 of them missed the CLI's deadline.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(childReportReads)
	for i := range rep.Resources {
		id := rep.Resources[i].ChildRunID
		if id == "" || rep.Resources[i].Child != nil {
			continue // none, or folded into the stored report (fold.go)
		}
		g.Go(func() error {
			child, err := getReport(gctx, b, id, level+1)
			if errors.Is(err, bus.ErrNotFound) {
				return nil // not started yet
			} else if err != nil {
				return err
			}
			rep.Resources[i].Child = child
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return rep, nil
}

// childReportReads is how many child reports of one run are read at
// once.
const childReportReads = 32

// runReport is the report of one run, without child reports.
func runReport(ctx context.Context, b *bus.Bus, rec *record) (*Report, error) {
	if rec.Status.Final() {
		data, err := b.GetReport(ctx, rec.RunID)
		if errors.Is(err, bus.ErrNotFound) {
			// Rejected before it started, or its report kept by its
			// only reader (Config.Finished): the header says how it
			// ended.
			return rec.header(), nil
		} else if err != nil {
			return nil, err
		}
		var rep Report
		if err := decodeReport(data, &rep); err != nil {
			return nil, fmt.Errorf("corrupt report: %w", err)
		}
		// The header is written after the report: it has the last word.
		rep.Status, rep.Error = rec.Status, rec.Error
		if rep.Status != RunSucceeded {
			rep.PostMessage = ""
		}
		return &rep, nil
	}
	if rec.Status == RunQueued || rec.Request.EachWorker && rec.FanOut == nil {
		return rec.header(), nil
	}
	return liveReport(ctx, b, rec)
}

// liveReport folds a running run's history over its plan.
func liveReport(ctx context.Context, b *bus.Bus, rec *record) (*Report, error) {
	session, err := loadSession(ctx, b, rec)
	if err != nil {
		return nil, err
	}
	var p *Plan
	if rec.Request.EachWorker {
		p = fanOutPlanOf(rec)
	} else if p, err = loadPlan(ctx, rec, session, func(ctx context.Context, ref string) (*bundle.Bundle, error) {
		data, err := b.GetBundle(ctx, ref)
		if err != nil {
			return nil, err
		}
		return bundle.Open(data)
	}); err != nil {
		return nil, err
	}
	m := newRunMachine(rec, session, p)
	m.start()
	err = b.ReadHistory(ctx, rec.RunID, func(e bus.HistoryEntry) {
		if e.Err == nil && verifyFact(rec, e.Outcome) == nil {
			m.apply(e.Outcome)
		}
	})
	if errors.Is(err, bus.ErrHistoryGone) {
		// The run ended while it was read: its stored report says how.
		if fresh, _, lerr := loadRecord(ctx, b.Runs(), rec.RunID); lerr == nil && fresh.Status.Final() {
			return runReport(ctx, b, fresh)
		}
	}
	if err != nil {
		return nil, err
	}
	rep := reportOf(rec, p, m)
	rep.PostMessage = "" // not finished
	return rep, nil
}

// header renders the header alone as a report (no resources yet).
func (rec *record) header() *Report {
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
		Trigger:         rec.Request.Trigger,
		Assignment:      rec.Request.Assignment,

		AssignmentVersion: rec.Request.AssignmentVersion,
		Offline:           rec.Request.Offline,
		ReportedBy:        rec.Request.ReportedBy,
		Coordinator:       rec.Owner,
		Error:             rec.Error,
		Counts:            rec.Counts,
		Resources:         []ResourceReport{},
	}
	if !rec.StartedAt.IsZero() {
		t := rec.StartedAt
		rep.StartedAt = &t
		end := rec.FinishedAt
		if end.IsZero() {
			end = time.Now()
		} else {
			f := rec.FinishedAt
			rep.FinishedAt = &f
		}
		rep.DurationMS = end.Sub(rec.StartedAt).Milliseconds()
	}
	return rep
}

// report is the run's report as this coordinator's machine has it.
func (r *run) report() *Report { return reportOf(r.rec, r.plan, r.m) }

// reportOf renders a run's state as its report (child reports not nested).
func reportOf(rec *record, p *Plan, m *machine) *Report {
	rep := rec.header()
	rep.Counts = m.counts
	rep.Resources = make([]ResourceReport, 0, len(m.tasks))
	for i, t := range m.tasks {
		res := p.Manifest.Resources[i]
		rr := ResourceReport{
			Ref: res.Ref(), Type: res.Type, Name: res.Name, Alias: res.Alias, Status: string(t.status),
			Noop: rec.Request.Noop, Refreshed: t.refreshed, Message: t.message, Error: t.err,
			DurationMS: t.durationMS, Worker: t.worker, Attempts: t.attempt, Pool: m.pools[i], HealthChecks: t.health,
			Diff: t.diff,
		}
		if res.Type == "apply" && t.attempt > 0 {
			rr.ChildRunID = childRunID(rec.RunID, i, t.attempt)
		}
		rep.Resources = append(rep.Resources, rr)
	}
	markNoAnswer(rec, rep)
	rep.PreMessage = p.PreMessage
	if m.counts.Failed == 0 {
		rep.PostMessage = p.PostMessage
	}
	return rep
}

// decodeRecord reads a run header.
func decodeRecord(data []byte, rec *record) error {
	return json.Unmarshal(data, rec)
}
