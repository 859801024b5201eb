package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Assignments: desired state kept converged by the workers of a pool.
// These names are part of the bus contract.
const (
	// BucketAssignments is the KV bucket of assignments: key = the
	// assignment's name, value = Assignment (JSON). Submitters write it
	// (`manifold assign`, `manifold unassign`), workers only read and
	// watch it.
	BucketAssignments = "manifold-assignments"
	// SubjectConvergePrefix is the root of convergence requests: a worker
	// asks the coordinators, on manifold.converge.<worker>, for a run of
	// one of its assignments on itself (ConvergeRequest, request-reply).
	SubjectConvergePrefix = "manifold.converge"
	// SubjectConvergeAll matches every worker's convergence requests (the
	// coordinators' endpoint).
	SubjectConvergeAll = SubjectConvergePrefix + ".*"
)

// ConvergeSubject returns the subject the named worker sends its
// convergence requests on.
func ConvergeSubject(worker string) string { return SubjectConvergePrefix + "." + token(worker) }

// Assignment is desired state for every worker of a pool: a stored
// bundle, its data and how it is kept converged. Each put under the same
// name is a new version (the KV revision).
type Assignment struct {
	V    int    `json:"v"`
	Name string `json:"name"`
	// Version is the entry's revision in BucketAssignments, filled on
	// read (not stored).
	Version uint64 `json:"version,omitempty"`
	// Bundle is the bundle's name in BucketBundles (sha256-<hex>), Entry
	// the entry manifest in it and ManifestName the name runs show.
	Bundle       string `json:"bundle"`
	Entry        string `json:"entry,omitempty"`
	ManifestName string `json:"manifest_name,omitempty"`
	// Pool: every live worker of it, and every one joining later, keeps
	// the assignment converged.
	Pool string `json:"pool"`
	// Where, when set, is an expression over a worker's facts (as a
	// resource's control if): only workers where it is true take the
	// assignment.
	Where string `json:"where,omitempty"`
	// IntervalMS is the period of full checks; zero means the worker's
	// default (30 minutes).
	IntervalMS int64 `json:"interval_ms,omitempty"`
	// HealthIntervalMS is the period of health-check-only runs; zero
	// means none.
	HealthIntervalMS int64 `json:"health_interval_ms,omitempty"`
	// Watch repairs drift as soon as an event hints it; false leaves
	// drift to the interval checks.
	Watch bool `json:"watch"`
	// Noop detects and reports drift without repairing it.
	Noop bool `json:"noop,omitempty"`
	// Data and DataFile are the runs' data (see RunRequest).
	Data     map[string]any `json:"data,omitempty"`
	DataFile string         `json:"data_file,omitempty"`
	// TaskTimeoutMS bounds each task without a timeout of its own.
	TaskTimeoutMS int64     `json:"task_timeout_ms,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	// By is who assigned it (the client's user, host), informative.
	By string `json:"by,omitempty"`
}

// Validate checks the fields a worker and a coordinator rely on.
func (a Assignment) Validate() error {
	if err := ValidToken(a.Name); err != nil {
		return fmt.Errorf("assignment name: %w", err)
	}
	if err := ValidToken(a.Pool); err != nil {
		return fmt.Errorf("assignment %s: pool: %w", a.Name, err)
	}
	if a.Bundle == "" {
		return fmt.Errorf("assignment %s: no bundle", a.Name)
	}
	if a.IntervalMS < 0 || a.HealthIntervalMS < 0 || a.TaskTimeoutMS < 0 {
		return fmt.Errorf("assignment %s: intervals and timeouts must not be negative", a.Name)
	}
	return nil
}

// ConvergeRequest is a worker's request for a convergence run of one of
// its assignments, on itself. The coordinator builds the run from the
// stored assignment, never from the request: a worker can only ever ask
// for stored desired state.
type ConvergeRequest struct {
	V          int    `json:"v"`
	Assignment string `json:"assignment"`
	// Version is the version the worker converges; a request for another
	// version than the stored one is refused (conflict).
	Version uint64 `json:"version"`
	// Trigger: start, assign, change, interval, drift or health.
	Trigger string `json:"trigger"`
	// Only limits the run to these resources (references) and the ones
	// they refresh: a drift repair.
	Only []string `json:"only,omitempty"`
	// Why says what hinted each resource, by reference (logs).
	Why map[string]string `json:"why,omitempty"`
	// HealthCheckOnly runs the health checks only.
	HealthCheckOnly bool `json:"health_check_only,omitempty"`
	// RunID, when set, starts nothing: it asks for the end of that
	// convergence run of the assignment on this worker, started by an
	// earlier request (a long poll, answered by any coordinator).
	RunID string `json:"run_id,omitempty"`
	// WaitMS is how long the coordinator may hold the reply waiting for
	// the run's end before it answers with Ended false (the worker then
	// asks again with RunID). Defaults to 30s; at most 5 minutes.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// Offline, with Trigger TriggerOffline, reports a run the worker
	// carried out from its cached plan while it could not reach the bus
	// (bus/offline.go): the coordinator records it, starts nothing.
	Offline *OfflineRun `json:"offline,omitempty"`
}

// ConvergeReply answers a ConvergeRequest: the run's ID and, once the run
// has ended (Ended), its status and the references of its resources by
// outcome. A reply with Ended false says the run goes on: ask again with
// its RunID.
type ConvergeReply struct {
	RunID   string   `json:"run_id,omitempty"`
	Ended   bool     `json:"ended"`
	Status  string   `json:"status,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Failed  []string `json:"failed,omitempty"`
	Stable  []string `json:"stable,omitempty"`
	// Critical is set when a health check answered CRITICAL.
	Critical bool   `json:"critical,omitempty"`
	Error    string `json:"run_error,omitempty"`
	// Total is the number of resources of the run (a worker caches the
	// run's plan only when it executed every one of them).
	Total int `json:"total,omitempty"`
	ErrorReply
}

// assignmentsBucket returns the assignments bucket, provisioned by Open,
// looked up on first use by an attached bus (so roles that never use it
// need no permission on it), created on first use by a bus opened
// OnDemand.
func (b *Bus) assignmentsBucket(ctx context.Context) (*Bucket, error) {
	b.assignMu.Lock()
	defer b.assignMu.Unlock()
	if b.assignments != nil {
		return b.assignments, nil
	}
	get := b.js.KeyValue
	if b.cfg.OnDemand {
		get = func(ctx context.Context, _ string) (jetstream.KeyValue, error) {
			return b.js.CreateOrUpdateKeyValue(ctx, b.assignmentsConfig())
		}
	}
	kv, err := get(ctx, BucketAssignments)
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("bus: bucket %s: %w", BucketAssignments, err)
	}
	b.assignments = &Bucket{kv: kv}
	return b.assignments, nil
}

// PutAssignment stores a (new version of an) assignment and returns its
// version.
func (b *Bus) PutAssignment(ctx context.Context, a Assignment) (uint64, error) {
	a.V, a.Version = Version, 0
	if err := a.Validate(); err != nil {
		return 0, err
	}
	data, err := json.Marshal(a)
	if err != nil {
		return 0, fmt.Errorf("bus: encode assignment %s: %w", a.Name, err)
	}
	bk, err := b.assignmentsBucket(ctx)
	if err != nil {
		return 0, err
	}
	return bk.Put(ctx, a.Name, data)
}

// GetAssignment returns the stored assignment name, or ErrNotFound.
func (b *Bus) GetAssignment(ctx context.Context, name string) (Assignment, error) {
	if err := ValidToken(name); err != nil {
		return Assignment{}, fmt.Errorf("assignment name: %w", err)
	}
	bk, err := b.assignmentsBucket(ctx)
	if err != nil {
		return Assignment{}, err
	}
	e, err := bk.Get(ctx, name)
	if err != nil {
		return Assignment{}, err
	}
	return decodeAssignment(name, e.Value, e.Revision)
}

// DeleteAssignment removes an assignment (ErrNotFound when there is none):
// workers stop keeping it converged; nothing it applied is undone.
func (b *Bus) DeleteAssignment(ctx context.Context, name string) error {
	if _, err := b.GetAssignment(ctx, name); err != nil {
		return err
	}
	bk, err := b.assignmentsBucket(ctx)
	if err != nil {
		return err
	}
	return bk.Delete(ctx, name)
}

// ListAssignments returns the stored assignments, sorted by name.
func (b *Bus) ListAssignments(ctx context.Context) ([]Assignment, error) {
	bk, err := b.assignmentsBucket(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := bk.Keys(ctx)
	if err != nil {
		return nil, err
	}
	out := []Assignment{}
	for _, k := range keys {
		a, err := b.GetAssignment(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		} else if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y Assignment) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

func decodeAssignment(key string, data []byte, rev uint64) (Assignment, error) {
	var a Assignment
	if err := Decode(data, &a); err != nil {
		return Assignment{}, fmt.Errorf("bus: assignment %s: %w", key, err)
	}
	a.Version = rev
	if a.Name == "" {
		a.Name = key
	}
	if a.Name != key {
		return Assignment{}, fmt.Errorf("bus: assignment %s: stored under another name (%q)", key, a.Name)
	}
	if err := a.Validate(); err != nil {
		return Assignment{}, fmt.Errorf("bus: %w", err)
	}
	return a, nil
}

// AssignmentUpdate is one change seen by WatchAssignments.
type AssignmentUpdate struct {
	// Name is the assignment's name; empty on the marker that ends the
	// initial values.
	Name string
	// Assignment is the new version; nil when the assignment was
	// removed.
	Assignment *Assignment
	// Err is set for a value that could not be read (the assignment is
	// then ignored).
	Err error
	// Initial is set on the stored values delivered first, and on the
	// marker that ends them (Name empty).
	Initial bool
}

// WatchAssignments sends every stored assignment (Initial), a marker once
// they have all been sent, then every change as it is made (a watch, not
// a poll), until ctx ends; then it closes the channel.
//
// It costs the server no consumer: the watch is a core NATS subscription
// to the bucket's subjects ($KV.manifold-assignments.>), made before the
// stored keys are listed (the stream's subject index, one request) and
// read (a direct get each), so a change made while the watch starts is
// either listed or heard. A change heard is read back from the stream by
// key, again (2 ms doubling to 1 s, for assignWakeWindow) until the
// stream shows it: the core message can come before the stream has
// stored it. After a reconnection, or when the client dropped messages of
// the subscription (a slow consumer), the keys are listed again and what
// changed meanwhile is sent. A NATS server allows 1,000 consumers per
// stream by default: an ordered consumer per worker stopped the 1,001st
// worker's watch.
//
// A bus in another JetStream domain (a leafnode site: Config.Domain)
// watches through an ordered consumer as before: NATS denies $KV.>
// subjects across a leafnode link between domains.
func (b *Bus) WatchAssignments(ctx context.Context) (<-chan AssignmentUpdate, error) {
	bk, err := b.assignmentsBucket(ctx)
	if err != nil {
		return nil, err
	}
	if b.cfg.Domain != "" {
		return b.watchAssignmentsConsumer(ctx, bk)
	}
	w := &assignWatch{b: b, bk: bk, prefix: "$KV." + BucketAssignments + ".",
		known: map[string]uint64{}, dirty: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	// Subscribed before anything is listed: a change made from now on is
	// heard, one made before is listed.
	sub, err := b.nc.Subscribe(w.prefix+">", w.heard)
	if err != nil {
		return nil, fmt.Errorf("bus: watch %s: %w", BucketAssignments, err)
	}
	_ = sub.SetPendingLimits(-1, 64<<20)
	status := b.nc.StatusChanged(nats.CONNECTED)
	out := make(chan AssignmentUpdate)
	go func() {
		defer close(out)
		defer b.nc.RemoveStatusListener(status)
		defer func() { _ = sub.Unsubscribe() }()
		w.run(ctx, sub, status, out)
	}()
	return out, nil
}

// assignWakeWindow is how long after a change is heard the watch reads its
// key again until the stream shows the change. A change that never shows
// (an update refused for its revision) costs reads for that long.
const assignWakeWindow = 30 * time.Second

// assignDropCheck is how often an idle watch checks whether the client
// dropped messages of its subscription (then it lists the keys again).
const assignDropCheck = 5 * time.Second

// assignWatch is the state of one WatchAssignments without a consumer.
type assignWatch struct {
	b      *Bus
	bk     *Bucket
	prefix string
	known  map[string]uint64 // key → revision sent (live keys only)

	mu    sync.Mutex
	dirty map[string]struct{} // keys heard, not yet read
	wake  chan struct{}
}

// heard is the subscription's handler: it notes the key and wakes run.
func (w *assignWatch) heard(m *nats.Msg) {
	key, ok := strings.CutPrefix(m.Subject, w.prefix)
	if !ok || key == "" {
		return
	}
	w.mu.Lock()
	w.dirty[key] = struct{}{}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pendingKey is a key heard whose change the stream did not show yet.
type pendingKey struct {
	until time.Time
}

func (w *assignWatch) run(ctx context.Context, sub *nats.Subscription, status chan nats.Status, out chan<- AssignmentUpdate) {
	send := func(u AssignmentUpdate) bool {
		select {
		case out <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	relist, initial := true, true
	failed := 0  // listings failed in a row
	backoff := 0 // reads of pending keys since the last wake
	dropped := 0 // messages the client dropped, as last seen
	pending := map[string]pendingKey{}
	for ctx.Err() == nil {
		if relist {
			if err := w.list(ctx, initial, send); err != nil {
				if ctx.Err() != nil {
					return
				}
				failed++
				if sleepCtx(ctx, refusedBackoff(failed)) != nil {
					return
				}
				continue
			}
			relist, initial, failed = false, false, 0
		}
		w.mu.Lock()
		for k := range w.dirty {
			pending[k] = pendingKey{until: time.Now().Add(assignWakeWindow)}
			backoff = 0
		}
		clear(w.dirty)
		w.mu.Unlock()
		for k, p := range pending {
			changed, err := w.read(ctx, k, send)
			if ctx.Err() != nil {
				return
			}
			if changed || (err == nil && time.Now().After(p.until)) {
				delete(pending, k)
			}
		}
		wait := assignDropCheck
		if len(pending) > 0 {
			backoff++
			wait = min(time.Millisecond<<min(backoff, 10), time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-w.wake:
		case <-status:
			relist = true // what was published while disconnected was not heard
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if n, err := sub.Dropped(); err == nil && n != dropped {
			dropped, relist = n, true
		}
	}
}

// list reads every stored assignment and sends what differs from what was
// sent (all of it, Initial, and the marker, the first time); a known key
// no longer stored is sent as removed.
func (w *assignWatch) list(ctx context.Context, initial bool, send func(AssignmentUpdate) bool) error {
	keys, err := w.b.StoredKeys(ctx, w.bk)
	if err != nil {
		return err
	}
	live := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		e, err := w.bk.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue // a delete or purge marker
		} else if err != nil {
			return err
		}
		live[k] = struct{}{}
		if w.known[k] == e.Revision {
			continue
		}
		w.known[k] = e.Revision
		if !send(w.update(k, e, initial)) {
			return ctx.Err()
		}
	}
	for k := range w.known {
		if _, ok := live[k]; !ok {
			delete(w.known, k)
			if !send(AssignmentUpdate{Name: k}) {
				return ctx.Err()
			}
		}
	}
	if initial && !send(AssignmentUpdate{Initial: true}) {
		return ctx.Err()
	}
	return nil
}

// read reads key and sends it when it differs from what was sent; changed
// reports whether it did.
func (w *assignWatch) read(ctx context.Context, key string, send func(AssignmentUpdate) bool) (changed bool, err error) {
	e, err := w.bk.Get(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		if _, ok := w.known[key]; !ok {
			return false, nil
		}
		delete(w.known, key)
		return send(AssignmentUpdate{Name: key}), nil
	case err != nil:
		return false, err
	case w.known[key] == e.Revision:
		return false, nil
	}
	w.known[key] = e.Revision
	return send(w.update(key, e, false)), nil
}

func (w *assignWatch) update(key string, e Entry, initial bool) AssignmentUpdate {
	u := AssignmentUpdate{Name: key, Initial: initial}
	a, err := decodeAssignment(key, e.Value, e.Revision)
	if err != nil {
		u.Err = err
	} else {
		u.Assignment = &a
	}
	return u
}

// watchAssignmentsConsumer is WatchAssignments through an ordered
// consumer on the bucket's stream (a bus in another JetStream domain).
func (b *Bus) watchAssignmentsConsumer(ctx context.Context, bk *Bucket) (<-chan AssignmentUpdate, error) {
	w, err := bk.kv.WatchAll(ctx)
	if err != nil {
		return nil, bk.translate("watch", ">", err)
	}
	out := make(chan AssignmentUpdate)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		initial := true
		send := func(u AssignmentUpdate) bool {
			select {
			case out <- u:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					initial = false
					if !send(AssignmentUpdate{Initial: true}) {
						return
					}
					continue
				}
				u := AssignmentUpdate{Name: e.Key(), Initial: initial}
				if e.Operation() == jetstream.KeyValuePut {
					a, err := decodeAssignment(e.Key(), e.Value(), e.Revision())
					if err != nil {
						u.Err = err
					} else {
						u.Assignment = &a
					}
				}
				if !send(u) {
					return
				}
			}
		}
	}()
	return out, nil
}
