package bus

import (
	"fmt"
	"time"
)

// Offline convergence runs: a worker that cannot reach the bus (its
// connection is down, or no coordinator answers) keeps its assignments
// converged from the plan it cached, spools each such run under its state
// directory and reports it when it is back, in a ConvergeRequest with
// Trigger TriggerOffline and Offline set, on its own convergence subject
// (manifold.converge.<worker>): no new subject, no new permission.
const (
	// TriggerOffline is the Trigger of a ConvergeRequest that reports an
	// offline run (Offline) instead of asking for a run. A coordinator
	// that does not know it refuses the request as an unknown trigger, so
	// the worker keeps the run spooled until one that does answers.
	TriggerOffline = "offline"
	// MaxOfflineOutcomes caps the outcomes one reported offline run
	// carries: the changed, failed and skipped resources come first;
	// stable ones are only counted (OfflineRun.Stable).
	MaxOfflineOutcomes = 1000
	// MaxOfflineText caps each outcome's message and error, in bytes.
	MaxOfflineText = 512
)

// OfflineRun is a convergence run a worker carried out on its own, from
// its cached plan, while it could not reach the bus. It is the worker's
// claim: the coordinator records it as an ordinary run marked offline
// and reported by that worker (RunRequest.Offline, ReportedBy), for an
// assignment of that worker only.
type OfflineRun struct {
	// RunID is chosen by the worker (a subject token); reporting the same
	// run twice records it once.
	RunID string `json:"run_id"`
	// Trigger is the run's trigger (start, interval, drift, ...).
	Trigger string `json:"trigger"`
	// AssignmentVersion is the version whose cached plan was applied.
	AssignmentVersion uint64 `json:"assignment_version"`
	// Manifest is the manifest's name (from the cached plan).
	Manifest   string    `json:"manifest,omitempty"`
	Noop       bool      `json:"noop,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Total is the number of resources the run checked; Stable how many
	// of them were already converged (not listed in Outcomes).
	Total  int `json:"total"`
	Stable int `json:"stable"`
	// Outcomes are the resources that changed, failed or were skipped, in
	// the order they ran (at most MaxOfflineOutcomes; Omitted says how
	// many more there were).
	Outcomes []OfflineOutcome `json:"outcomes,omitempty"`
	Omitted  int              `json:"omitted,omitempty"`
	// Why says why the worker ran offline ("connection down", "no
	// coordinator answers").
	Why string `json:"why,omitempty"`
}

// OfflineOutcome is one resource's outcome in an offline run.
type OfflineOutcome struct {
	Ref        string     `json:"ref"`
	Status     TaskStatus `json:"status"`
	Changed    bool       `json:"changed,omitempty"`
	Refreshed  bool       `json:"refreshed,omitempty"`
	Message    string     `json:"message,omitempty"`
	Error      string     `json:"error,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
}

// Validate checks what a coordinator relies on before recording r.
func (r OfflineRun) Validate() error {
	if err := ValidToken(r.RunID); err != nil {
		return fmt.Errorf("offline run: run_id: %w", err)
	}
	switch r.Trigger {
	case "start", "assign", "change", "interval", "drift", "health":
	default:
		return fmt.Errorf("offline run %s: trigger %q: want start, assign, change, interval, drift or health", r.RunID, r.Trigger)
	}
	if r.AssignmentVersion == 0 {
		return fmt.Errorf("offline run %s: no assignment_version", r.RunID)
	}
	if r.StartedAt.IsZero() || r.FinishedAt.Before(r.StartedAt) {
		return fmt.Errorf("offline run %s: started_at %s, finished_at %s: want a start before the end", r.RunID, r.StartedAt, r.FinishedAt)
	}
	if len(r.Outcomes) > MaxOfflineOutcomes {
		return fmt.Errorf("offline run %s: %d outcomes, at most %d", r.RunID, len(r.Outcomes), MaxOfflineOutcomes)
	}
	if r.Total < 0 || r.Stable < 0 || r.Omitted < 0 || r.Stable+len(r.Outcomes)+r.Omitted > r.Total {
		return fmt.Errorf("offline run %s: total %d is less than stable %d + outcomes %d + omitted %d", r.RunID, r.Total, r.Stable, len(r.Outcomes), r.Omitted)
	}
	seen := make(map[string]bool, len(r.Outcomes))
	for i, o := range r.Outcomes {
		if o.Ref == "" || seen[o.Ref] {
			return fmt.Errorf("offline run %s: outcome %d: ref %q empty or repeated", r.RunID, i, o.Ref)
		}
		seen[o.Ref] = true
		switch o.Status {
		case TaskChanged, TaskFailed, TaskSkipped, TaskStable:
		default:
			return fmt.Errorf("offline run %s: outcome %s: status %q: want changed, failed, skipped or stable", r.RunID, o.Ref, o.Status)
		}
		if len(o.Message) > MaxOfflineText || len(o.Error) > MaxOfflineText {
			return fmt.Errorf("offline run %s: outcome %s: message or error over %d bytes", r.RunID, o.Ref, MaxOfflineText)
		}
	}
	return nil
}
