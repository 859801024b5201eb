package bus

import (
	"fmt"
	"strings"
)

// Subjects, streams and buckets. They are part of manifold's bus contract:
// clients such as scripts and the nats CLI depend on them. Build subjects
// with the functions below, never inline.
const (
	// SubjectPrefix is the root of every manifold subject.
	SubjectPrefix = "manifold"
	// SubjectRunSubmit receives fire-and-forget run requests (idempotent by
	// the Nats-Msg-Id header).
	SubjectRunSubmit = "manifold.runs.submit"
	// SubjectTasksAll matches every pool's task subject.
	SubjectTasksAll = "manifold.tasks.>"
	// SubjectOutcomesAll matches every run's outcome subject.
	SubjectOutcomesAll = "manifold.outcomes.>"
	// SubjectEventsAll matches every run's events.
	SubjectEventsAll = "manifold.events.>"
	// SubjectAPIPrefix is the prefix of the micro service endpoints.
	SubjectAPIPrefix = "manifold.api"

	// StreamRuns holds run requests (work queue).
	StreamRuns = "MANIFOLD_RUNS"
	// StreamTasks holds resource tasks for workers (work queue).
	StreamTasks = "MANIFOLD_TASKS"
	// StreamOutcomes holds task outcomes for coordinators (work queue).
	StreamOutcomes = "MANIFOLD_OUTCOMES"
	// StreamEvents holds progress events (limits).
	StreamEvents = "MANIFOLD_EVENTS"

	// BucketRuns is the KV bucket of run records.
	BucketRuns = "manifold-runs"
	// BucketWorkers is the KV bucket of live workers (entries expire).
	BucketWorkers = "manifold-workers"
	// BucketResults is the KV bucket of finished task outcomes, so that a
	// redelivered finished task is answered rather than run again.
	BucketResults = "manifold-results"
	// BucketBundles is the object store of manifest bundles.
	BucketBundles = "manifold-bundles"
)

// TaskSubject returns the task subject of a worker pool.
func TaskSubject(pool string) string { return "manifold.tasks." + token(pool) }

// OutcomeSubject returns the subject outcomes of a run are published on.
func OutcomeSubject(runID string) string { return "manifold.outcomes." + token(runID) }

// EventSubject returns the subject of an event of a run:
// manifold.events.<root run>.<run>.<kind>. Events of child runs share their
// root run's prefix, so following a root run follows its whole tree.
func EventSubject(rootRunID, runID string, kind EventKind) string {
	return "manifold.events." + token(rootRunID) + "." + token(runID) + "." + string(kind)
}

// EventsOfRun returns the subject filter matching every event of a run
// tree, given its root run ID.
func EventsOfRun(rootRunID string) string { return "manifold.events." + token(rootRunID) + ".>" }

// ValidToken reports whether s can be used as one subject token (a pool
// name or a run ID): non-empty, no dots, spaces or wildcards.
func ValidToken(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	if strings.ContainsAny(s, ". \t\r\n*>") {
		return fmt.Errorf("%q must not contain dots, spaces, '*' or '>'", s)
	}
	return nil
}

func token(s string) string {
	if ValidToken(s) != nil {
		// Callers validate names at their boundary; never build a subject
		// that could match more than intended.
		return strings.NewReplacer(".", "_", " ", "_", "*", "_", ">", "_").Replace(s)
	}
	return s
}
