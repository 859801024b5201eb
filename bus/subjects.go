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
	// SubjectPinnedAll matches every worker's pinned task subject
	// (PinnedSubject): tasks of runs pinned to one worker, kept apart from
	// the pools' tasks.
	SubjectPinnedAll = "manifold.pinned.>"
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
	// StreamPinned holds the tasks pinned to one worker (work queue, no
	// consumer: each worker reads its subject and deletes what it has
	// done; bus.PinnedTasks). Apart from StreamTasks so that a pinned task
	// stored does not wake the pools' consumers' waiting pulls.
	StreamPinned = "MANIFOLD_PINNED"
	// StreamHistory holds each run's history on its outcome subject: task
	// outcomes and the other facts that move a run on (limits retention,
	// purged per run when the run ends).
	StreamHistory = "MANIFOLD_HISTORY"
	// StreamOutcomes was the work-queue stream of outcomes before runs kept
	// a history; Open removes it.
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
	// BucketReports is the object store of the reports of finished runs,
	// by run ID.
	BucketReports = "manifold-reports"
	// BucketTasks is the object store of tasks too large for one message
	// (Task.Ref), by digest name: only coordinators write it, workers
	// read it.
	BucketTasks = "manifold-tasks"
)

// PinnedPoolPrefix starts the name of the pool each worker takes alone:
// "worker-<name>". Runs pinned to a worker (fleet fan-out) use it.
const PinnedPoolPrefix = "worker-"

// PinnedPool returns the pool only the named worker takes tasks of.
func PinnedPool(worker string) string { return PinnedPoolPrefix + worker }

// TaskSubject returns the task subject of a worker pool: manifold.tasks.<pool>,
// or, for the pool of one worker (PinnedPool), PinnedSubject of the worker.
func TaskSubject(pool string) string {
	if worker, ok := strings.CutPrefix(pool, PinnedPoolPrefix); ok && worker != "" {
		return PinnedSubject(worker)
	}
	return LegacyTaskSubject(pool)
}

// LegacyTaskSubject returns manifold.tasks.<pool>, the task subject of
// every pool, pinned ones included, before StreamPinned: coordinators of
// earlier versions publish a worker's pinned tasks there.
func LegacyTaskSubject(pool string) string { return "manifold.tasks." + token(pool) }

// PinnedSubject returns the subject of the tasks pinned to the named
// worker: manifold.pinned.<worker> (stream StreamPinned).
func PinnedSubject(worker string) string { return "manifold.pinned." + token(worker) }

// taskStream returns the stream holding the tasks of pool.
func taskStream(pool string) string {
	if strings.HasPrefix(pool, PinnedPoolPrefix) && len(pool) > len(PinnedPoolPrefix) {
		return StreamPinned
	}
	return StreamTasks
}

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

// MaxTokenLength is the longest run ID, pool or worker name.
const MaxTokenLength = 128

// ValidToken reports whether s can be used as a run ID, pool or worker
// name: 1 to 128 of A-Z a-z 0-9 _ -, so it is one subject token and a valid
// key-value key.
func ValidToken(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	if len(s) > MaxTokenLength {
		return fmt.Errorf("%q is longer than %d characters", s, MaxTokenLength)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("%q may hold only letters, digits, '_' and '-' (found %q)", s, r)
		}
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
