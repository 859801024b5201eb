package bus

import (
	"time"

	"github.com/manifold-run/manifold/schemas"
)

// Version is the envelope version every message carries in its "v" field.
// Readers accept messages whose version they know and reject others with an
// error naming the version.
const Version = 1

// RunRequest asks a coordinator to start a run. It is published on
// SubjectRunSubmit (fire and forget) or sent to the runs.submit endpoint.
type RunRequest struct {
	V int `json:"v"`
	// RunID may be chosen by the client (a subject token); empty means the
	// coordinator assigns one.
	RunID string `json:"run_id,omitempty"`
	// IdempotencyKey: the same key never starts two runs.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// ManifestYAML carries a small manifest inline (YAML, JSON or CUE text,
	// told apart by ManifestName's extension).
	ManifestYAML string `json:"manifest_yaml,omitempty"`
	// ManifestName is the manifest's file name, used in errors and reports.
	ManifestName string `json:"manifest_name,omitempty"`
	// Bundle names a bundle instead of an inline manifest: a name in the
	// bundles object store ("sha256-<hex>", as `manifold run` uploads) or
	// obj://bucket/key for a tar.gz in any object store bucket.
	Bundle string `json:"bundle,omitempty"`
	// Entry is the entry manifest's path inside the bundle. Defaults to
	// manifest.yaml.
	Entry string `json:"entry,omitempty"`
	// WorkDir is a local directory holding the bundle root, for workers on
	// the same host (embedded mode); relative paths of a manifest resolve
	// against its directory there. Empty: workers extract the bundle.
	WorkDir string `json:"work_dir,omitempty"`
	// Data overrides the manifest's data; it always wins.
	Data map[string]any `json:"data,omitempty"`
	// DataFile, instead of Data, names a JSON file (a map) inside Bundle
	// holding the run's data: data too large for the request (a message
	// is at most the server's maximum payload, 1 MiB by default) travels
	// in the bundle, up to the bundle's limits. Child runs share it.
	DataFile string `json:"data_file,omitempty"`
	// Facts are the facts the coordinator resolves the manifest's data
	// hierarchy over (the host's, for an embedded apply; --fact for a
	// remote run). Workers render other templates with their own facts.
	Facts map[string]any `json:"facts,omitempty"`
	// Noop reports what would change without changing anything.
	Noop bool `json:"noop,omitempty"`
	// HealthCheckOnly runs health checks only.
	HealthCheckOnly bool `json:"health_check_only,omitempty"`
	// Pool is the default worker pool of the run's tasks. Defaults to
	// "default".
	Pool string `json:"pool,omitempty"`
	// EachWorker runs the manifest once per live worker of Pool, each as a
	// child run pinned to that worker; the run's report aggregates them.
	EachWorker bool `json:"each_worker,omitempty"`
	// Where keeps, for a fan-out, the live workers of Pool whose published
	// facts make this expr-lang expression true (as an assignment's where:
	// facts.role == 'db'). A run with a where fans out as with EachWorker;
	// one matching no live worker is rejected.
	Where string `json:"where,omitempty"`
	// AnswerTimeoutMS bounds, in a fan-out, how long each worker's child
	// run may take from its start to its end, in milliseconds: a child
	// not finished by then is cancelled and its worker reported as "no
	// answer". Zero means 10 minutes.
	AnswerTimeoutMS int64 `json:"answer_timeout_ms,omitempty"`
	// PinWorker sends every task of the run (and of its child runs) to
	// that worker alone, whatever the resources' targets.
	PinWorker string `json:"pin_worker,omitempty"`
	// MaxDepth limits nested apply runs; zero means the coordinator's.
	// A coordinator rejects a request above its policy (its
	// --max-depth-limit).
	MaxDepth int `json:"max_depth,omitempty"`
	// MaxTreeRuns caps the child runs the run's tree starts, all depths
	// together; zero means the coordinator's. A coordinator rejects a
	// request above its policy (its --max-tree-runs-limit).
	MaxTreeRuns int `json:"max_tree_runs,omitempty"`
	// TaskTimeout bounds each task without a timeout of its own, in
	// milliseconds; zero means the coordinator's default.
	TaskTimeoutMS int64 `json:"task_timeout_ms,omitempty"`
	// Trigger says why a convergence run runs: start, assign, change,
	// interval, drift or health (apply --watch, assignments). Empty for a
	// run someone asked for.
	Trigger string `json:"trigger,omitempty"`
	// Assignment and AssignmentVersion name the assignment a convergence
	// run keeps converged.
	Assignment        string `json:"assignment,omitempty"`
	AssignmentVersion uint64 `json:"assignment_version,omitempty"`
	// Only limits the run to these resources (references) and, through
	// their subscriptions, the resources they refresh: a repair run of an
	// assignment (compile.Subset). Empty runs every resource.
	Only []string `json:"only,omitempty"`
	// Offline marks a convergence run a worker carried out from its
	// cached plan while it could not reach the bus, and reported later;
	// ReportedBy names that worker. Its outcomes are the worker's claims
	// (see OfflineRun). Set by coordinators only.
	Offline    bool   `json:"offline,omitempty"`
	ReportedBy string `json:"reported_by,omitempty"`
}

// DefaultPool is the pool of tasks that name none.
const DefaultPool = "default"

// Task is one resource execution for a worker, published on
// TaskSubject(pool) with message ID "<run>/<task>/<attempt>".
type Task struct {
	V         int    `json:"v"`
	RunID     string `json:"run_id"`
	RootRunID string `json:"root_run_id,omitempty"`
	// Task is the resource's index in its manifest.
	Task int `json:"task"`
	// Attempt starts at 1 and grows with each retry the coordinator makes.
	Attempt int `json:"attempt"`
	// Manifest is the manifest the resource belongs to.
	Manifest string           `json:"manifest,omitempty"`
	Resource schemas.Resource `json:"resource"`
	// Data is the run's resolved data, for rendering templates.
	Data            map[string]any `json:"data,omitempty"`
	Noop            bool           `json:"noop,omitempty"`
	HealthCheckOnly bool           `json:"health_check_only,omitempty"`
	// Refresh is set when a resource this one subscribes to changed.
	Refresh bool `json:"refresh,omitempty"`
	// Subscribers are the references of the run's resources that
	// subscribe to this one: when it changes, the worker records a
	// refresh debt for each before it reports the change, paid when the
	// subscriber next runs to success (a crash in between loses no
	// refresh).
	Subscribers []string `json:"subscribers,omitempty"`
	WorkDir     string   `json:"work_dir,omitempty"`
	// Bundle and Entry locate the manifest's files when WorkDir is empty:
	// the worker extracts the bundle and works in Entry's directory.
	Bundle string `json:"bundle,omitempty"`
	Entry  string `json:"entry,omitempty"`
	Pool   string `json:"pool"`
	// TimeoutMS bounds the execution on the worker.
	TimeoutMS int64 `json:"timeout_ms"`
	// Deadline is when the coordinator gives up on the task: a worker that
	// takes it later fails it at once, and execution never runs past it.
	Deadline time.Time `json:"deadline"`
	// Segment, when set, lists more resources after Resource to execute in
	// order in the same task: each is answered by its own outcome. Without
	// ContinueAfterFailure a failed or skipped one ends the segment; with
	// it the segment goes on, and ends only before a resource that
	// requires one of its failed or skipped resources
	// (SegmentItem.Requires), or after a failed resource that has retries
	// left. The coordinator takes the rest back when it reads the outcome
	// that ended the segment.
	Segment []SegmentItem `json:"segment,omitempty"`
	// ContinueAfterFailure is set by coordinators that expect a segment
	// to go on past a failure (see Segment); a worker that does not know
	// it ends the segment at the first failure, as before.
	ContinueAfterFailure bool `json:"continue_after_failure,omitempty"`
	// Ref, when set, names the whole task in the bundles object store: a
	// task too large for one message (large file content, large run data,
	// a segment of large resources) travels by reference, and the message
	// carries only the fields that route and identify it. Workers read it
	// with Bus.ResolveTask.
	Ref string `json:"ref,omitempty"`
	// Resumed is set on a task published again by a coordinator that took
	// the run over (or republished it after a lost acknowledgement): a
	// worker may hold a recorded outcome of it from an earlier message, so
	// it looks for one before executing. A first delivery of a task not
	// resumed has no recorded outcome and is executed without that lookup.
	Resumed bool `json:"resumed,omitempty"`
	// Token is the capability of this task attempt (TaskToken): the
	// worker signs its outcome with it (SignOutcome). It travels in the
	// task message only, never in a body stored by reference.
	Token string `json:"token,omitempty"`
	// SegmentTokens are the tokens of Segment's items, in order, when the
	// task travels by reference (the stored body holds none); ResolveTask
	// puts them back into the items.
	SegmentTokens []string `json:"segment_tokens,omitempty"`
	// Assignment names the assignment whose convergence run the task
	// belongs to: the worker it is pinned to watches the resource's paths
	// for drift.
	Assignment string `json:"assignment,omitempty"`
	// Assume is set on noop tasks: what other resources of the run would
	// have created before this one (see Assume).
	Assume *Assume `json:"assume,omitempty"`
	// BatchOutcomes is set by coordinators that read outcome batches
	// (FactBatch) on a segment task: the worker may answer the segment's
	// resources in batches (OutcomeBatch) rather than one message each. A
	// worker that does not know it publishes one outcome per resource,
	// which every coordinator reads.
	BatchOutcomes bool `json:"batch_outcomes,omitempty"`
}

// SegmentItem is one more resource of a segment task.
type SegmentItem struct {
	Task     int              `json:"task"`
	Attempt  int              `json:"attempt"`
	Resource schemas.Resource `json:"resource"`
	Refresh  bool             `json:"refresh,omitempty"`
	// TimeoutMS bounds this resource's execution.
	TimeoutMS int64 `json:"timeout_ms"`
	// Traceparent is the W3C trace context of this resource's span.
	Traceparent string `json:"traceparent,omitempty"`
	// Requires are the tasks of the same segment this resource requires.
	Requires []int `json:"requires,omitempty"`
	// Token is the capability of this item's task attempt (see
	// Task.Token).
	Token string `json:"token,omitempty"`
	// Subscribers: see Task.Subscribers.
	Subscribers []string `json:"subscribers,omitempty"`
	// Assume: see Task.Assume.
	Assume *Assume `json:"assume,omitempty"`
}

// MsgID returns the task's JetStream message ID.
func (t Task) MsgID() string { return TaskMsgID(t.RunID, t.Task, t.Attempt) }

// Timeout returns TimeoutMS as a duration.
func (t Task) Timeout() time.Duration { return time.Duration(t.TimeoutMS) * time.Millisecond }

// TaskStatus is the state of a task.
type TaskStatus string

// Task states. Pending and Dispatched are not final: a dispatched task is
// published and waits for, or runs on, a worker (which of the two is not
// tracked: the worker's outcome is the next fact).
const (
	TaskPending    TaskStatus = "pending"
	TaskDispatched TaskStatus = "dispatched"
	TaskChanged    TaskStatus = "changed"
	TaskStable     TaskStatus = "stable"
	TaskFailed     TaskStatus = "failed"
	TaskSkipped    TaskStatus = "skipped"
	TaskCancelled  TaskStatus = "cancelled"
)

// Final reports whether the status is an end state.
func (s TaskStatus) Final() bool {
	switch s {
	case TaskChanged, TaskStable, TaskFailed, TaskSkipped, TaskCancelled:
		return true
	}
	return false
}

// Outcome is a worker's answer to a task, published on OutcomeSubject(run).
type Outcome struct {
	V       int    `json:"v"`
	RunID   string `json:"run_id"`
	Task    int    `json:"task"`
	Attempt int    `json:"attempt"`
	Ref     string `json:"ref"`
	// Status is changed, stable or failed.
	Status     TaskStatus `json:"status"`
	Changed    bool       `json:"changed"`
	Refreshed  bool       `json:"refreshed,omitempty"`
	Message    string     `json:"message,omitempty"`
	Diff       string     `json:"diff,omitempty"`
	Error      string     `json:"error,omitempty"`
	DurationMS int64      `json:"duration_ms"`
	Worker     string     `json:"worker"`
	// Delivery is the JetStream delivery count of the task message.
	Delivery int `json:"delivery"`
	// Replayed is set when the outcome was answered from the record of an
	// earlier delivery rather than executed again.
	Replayed bool `json:"replayed,omitempty"`

	// HealthChecks are the results of the resource's health checks.
	HealthChecks []HealthCheck `json:"health_checks,omitempty"`

	// Kind says what fact of the run's history this is; empty for a task
	// outcome (see FactKind).
	Kind FactKind `json:"kind,omitempty"`

	// MAC signs the outcome: made with the task's token by the worker
	// the task was delivered to (SignOutcome), or with the run's secret
	// by a coordinator (SignFact). A coordinator applies no fact without
	// a valid one. A replayed outcome keeps the MAC of its record.
	MAC string `json:"mac,omitempty"`

	// Outcomes are, in a message of Kind FactBatch, the task outcomes it
	// carries, in the order they finished, each with its own MAC (see
	// OutcomeBatch). Empty in any other fact.
	Outcomes []Outcome `json:"outcomes,omitempty"`
}

// EventKind names a progress event; it is the last subject token.
type EventKind string

// Event kinds.
const (
	EventRunQueued      EventKind = "run_queued"
	EventRunStarted     EventKind = "run_started"
	EventTaskDispatched EventKind = "task_dispatched"
	EventTaskFinished   EventKind = "task_finished"
	EventRunFinished    EventKind = "run_finished"
	EventRunRejected    EventKind = "run_rejected"
)

// Event is a progress event of a run, published on EventSubject.
type Event struct {
	V         int       `json:"v"`
	Kind      EventKind `json:"kind"`
	Time      time.Time `json:"time"`
	RunID     string    `json:"run_id"`
	RootRunID string    `json:"root_run_id,omitempty"`
	// Manifest is the name of the apply resource for events of child runs,
	// else the manifest file.
	Manifest   string     `json:"manifest,omitempty"`
	Task       *int       `json:"task,omitempty"`
	Ref        string     `json:"ref,omitempty"`
	Status     string     `json:"status,omitempty"`
	Message    string     `json:"message,omitempty"`
	Error      string     `json:"error,omitempty"`
	Worker     string     `json:"worker,omitempty"`
	DurationMS int64      `json:"duration_ms,omitempty"`
	Done       int        `json:"done,omitempty"`
	Total      int        `json:"total,omitempty"`
	Outcome    TaskStatus `json:"outcome,omitempty"`
	// Diff is, on task_finished, the resource's diff as the run report
	// has it (ResourceReport.Diff in the coordinator: redacted, at most
	// 64 KiB).
	Diff string `json:"diff,omitempty"`
}

// HealthCheck is how one health check of a resource ended.
type HealthCheck struct {
	Name string `json:"name"`
	// Status is OK, WARNING, CRITICAL or UNKNOWN.
	Status string `json:"status"`
	Output string `json:"output,omitempty"`
	Tries  int    `json:"tries"`
	// Ignored: in noop, the check of a resource that would change is
	// reported but does not fail it.
	Ignored bool `json:"ignored,omitempty"`
}
