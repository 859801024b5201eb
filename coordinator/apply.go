package coordinator

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/resources/template"
)

// Sentinels of apply resources; the messages are what users read.
var (
	// ErrDepthExceeded: nested apply resources went deeper than the limit.
	ErrDepthExceeded = errors.New("apply: maximum depth exceeded")
	// ErrApplyDenied: allow_apply is false and the child manifest holds
	// apply resources.
	ErrApplyDenied = errors.New("apply: child manifest contains apply resources but allow_apply is false")
	// ErrTreeRunsExceeded: a run tree started as many child runs as it may.
	ErrTreeRunsExceeded = errors.New("apply: maximum child runs of the run tree exceeded")
	// ErrNoBundle: an apply resource in a run without a bundle.
	ErrNoBundle = errors.New("apply: the run has no bundle to resolve child manifests in")
)

// applyProps are the apply type's own properties (CCM's names).
type applyProps = compile.ApplyProps

// childContext is what a child run inherits: derived from the parent's
// modes and the apply resource's properties, never by mutating the parent.
type childContext struct {
	Noop, HealthCheckOnly, DenyApply bool
	Depth                            int
}

// deriveChild applies the seeds' tables: noop and health-check mode are
// strengthened, never weakened; depth grows by one; allow_apply false
// denies applies in the child.
func deriveChild(parentNoop, parentHealthCheckOnly bool, parentDepth int, p applyProps) childContext {
	return childContext{
		Noop:            parentNoop || p.Noop,
		HealthCheckOnly: parentHealthCheckOnly || p.HealthCheckOnly,
		DenyApply:       p.AllowApply != nil && !*p.AllowApply,
		Depth:           parentDepth + 1,
	}
}

// startChild starts the child run of apply resource i, or fails the
// resource before any child resource runs (depth, path, no bundle).
func (r *run) startChild(ctx, spanCtx context.Context, i int) {
	rec := r.rec
	res := r.plan.Manifest.Resources[i]
	fail := func(err error) { r.childFailed(ctx, i, fmt.Errorf("%s: %w", res.Ref(), err)) }

	props, err := r.applyProps(i)
	if err != nil {
		fail(err)
		return
	}
	child := deriveChild(rec.Request.Noop, rec.Request.HealthCheckOnly, rec.Depth, props)
	maxDepth := min(cmp.Or(rec.MaxDepth, rec.Request.MaxDepth, r.c.cfg.MaxDepth), r.c.cfg.MaxDepthLimit)
	if rec.Request.Bundle == "" {
		fail(ErrNoBundle)
		return
	}
	entry, err := bundle.Resolve(r.entry(), res.Name)
	if err != nil {
		fail(err)
		return
	}
	chain := append(append([]string(nil), r.chain()...), entry)
	if child.Depth > maxDepth {
		fail(fmt.Errorf("%w: depth %d is over the limit of %d: %s", ErrDepthExceeded, child.Depth, maxDepth, strings.Join(chain, " → ")))
		return
	}
	// A slot of the tree's live child runs, or wait for one (the task
	// stays dispatched; startWaiting comes back to it).
	if !r.childSlot(i) {
		return
	}
	held := true
	defer func() {
		if held {
			r.c.trees.release(rootOf(rec))
		}
	}()
	treeRuns := r.maxTreeRuns()
	if err := r.c.countTreeRun(ctx, rootOf(rec), treeRuns); err != nil {
		fail(err)
		return
	}
	session := make(map[string]sessionRef, len(r.session)+r.m.done)
	for k, v := range r.session {
		session[k] = v
	}
	for j, t := range r.m.tasks {
		if t.status.Final() {
			ref := sessionRef{Status: t.status, Changed: t.changed}
			res := r.plan.Manifest.Resources[j]
			session[res.Ref()] = ref
			if res.Alias != "" {
				session[res.Type+"#"+res.Alias] = ref
			}
		}
	}
	t := r.m.tasks[i]
	req := bus.RunRequest{
		RunID: r.childID(i, t.attempt), Bundle: rec.Request.Bundle, Entry: entry, ManifestName: entry,
		WorkDir: rec.Request.WorkDir, Data: rec.Request.Data, DataFile: rec.Request.DataFile, Noop: child.Noop, HealthCheckOnly: child.HealthCheckOnly,
		Pool: rec.Request.Pool, MaxDepth: maxDepth, MaxTreeRuns: treeRuns, TaskTimeoutMS: rec.Request.TaskTimeoutMS,
		PinWorker: rec.Request.PinWorker,
	}
	if req.PinWorker != "" {
		// Compiled for the same host: with its facts (docs/fleet.md).
		req.Facts = rec.Request.Facts
	}
	r.c.metrics.depth.Record(ctx, int64(child.Depth))
	// A large session (a parent of many resources) is stored apart, once:
	// the child's header, written at every lease renewal, stays small.
	var sessionRef string
	if data, err := json.Marshal(session); err != nil {
		fail(err)
		return
	} else if len(data) > maxInlineSession {
		if sessionRef, err = r.c.bus.PutBlob(ctx, "session-", data); err != nil {
			fail(fmt.Errorf("store the session for the child run: %w", err))
			return
		}
		session = nil
	}
	held = false // accept owns the slot now
	err = r.c.accept(ctx, spanCtx, req, &childOf{
		parent: rec, task: i, attempt: t.attempt, depth: child.Depth, name: res.Name, chain: chain,
		applyData: props.Data, denyApply: child.DenyApply, session: session, sessionRef: sessionRef, maxDepth: maxDepth,
		slotHeld: true,
	})
	if err != nil {
		fail(fmt.Errorf("start child run: %w", err))
		return
	}
	r.children[i] = true
}

// maxTreeRuns is the cap on the child runs of the run's tree: the
// request's (children inherit the root's), else the coordinator's, never
// above the coordinator's policy.
func (r *run) maxTreeRuns() int {
	return min(cmp.Or(r.rec.Request.MaxTreeRuns, r.c.cfg.MaxTreeRuns), r.c.cfg.MaxTreeRunsLimit)
}

// treeKey is the runs bucket key counting the child runs of a run tree.
func treeKey(root string) string { return "tree." + root }

// countTreeRun counts one more child run of the tree rooted at root, or
// says why it may not start. The count is a compare-and-swap on one small
// key; the root run removes it when it ends. A child started again by a
// coordinator resuming its parent counts again: the limit errs on the safe
// side.
func (c *Coordinator) countTreeRun(ctx context.Context, root string, max int) error {
	for range 100 {
		e, err := c.bus.Runs().Get(ctx, treeKey(root))
		switch {
		case errors.Is(err, bus.ErrNotFound):
			_, err = c.bus.Runs().Create(ctx, treeKey(root), []byte("1"))
			if errors.Is(err, bus.ErrExists) {
				continue
			}
			return err
		case err != nil:
			return err
		}
		n, _ := strconv.Atoi(string(e.Value))
		if n >= max {
			return fmt.Errorf("%w: the run tree of %s has started %d child runs, the limit (max_tree_runs of the request, else coordinator --max-tree-runs)", ErrTreeRunsExceeded, root, n)
		}
		_, err = c.bus.Runs().Update(ctx, treeKey(root), []byte(strconv.Itoa(n+1)), e.Revision)
		if errors.Is(err, bus.ErrRevisionMismatch) {
			continue
		}
		return err
	}
	return fmt.Errorf("count the child runs of %s: too much contention", root)
}

// childID is the run ID of the child run of apply task i's attempt.
func (r *run) childID(i, attempt int) string { return childRunID(r.rec.RunID, i, attempt) }

// childFailed records in the run's history that apply task i failed
// before its child run could start: a fact like any outcome, so a
// resuming coordinator decides the same.
func (r *run) childFailed(ctx context.Context, i int, err error) {
	o := bus.Outcome{RunID: r.rec.RunID, Task: i, Attempt: r.m.tasks[i].attempt, Ref: r.ref(i),
		Status: bus.TaskFailed, Error: err.Error(), Worker: "coordinator " + r.c.cfg.Name}
	bus.SignFact(&o, r.rec.Secret)
	if perr := r.c.bus.PublishFact(context.WithoutCancel(ctx), o, bus.TaskMsgID(r.rec.RunID, i, o.Attempt)+"/child"); perr != nil {
		r.log.Error("apply failure not recorded; the run is left for recovery", "resource", o.Ref, "error", perr)
	}
}

// cancelChild appends a cancellation to the history of apply task i's
// child run; its coordinator cancels it, and its own children in turn.
func (r *run) cancelChild(ctx context.Context, i, attempt int) {
	id := r.childID(i, attempt)
	fact := bus.Outcome{RunID: id, Kind: bus.FactCancel}
	bus.SignFact(&fact, bus.ChildSecret(r.rec.Secret, id))
	if err := r.c.bus.PublishFact(context.WithoutCancel(ctx), fact, id+"/cancel"); err != nil {
		r.log.Warn("child run not cancelled", "child_run_id", id, "error", err)
		return
	}
	// Workers drop the child's queued tasks and kill its running ones now,
	// not only once its coordinator has read the cancellation.
	r.c.announceCancel(ctx, id)
}

// applyProps decodes apply resource i's properties, rendered from the
// run's data.
func (r *run) applyProps(i int) (applyProps, error) {
	return compile.DecodeApply(r.plan.Manifest.Resources[i].Properties, template.Scope{Data: r.plan.Data})
}

// entry is the run's manifest path inside its bundle.
func (r *run) entry() string { return r.rec.entry() }

// entry is the run's manifest path inside its bundle.
func (rec *record) entry() string {
	return cmp.Or(rec.Entry, rec.Request.Entry, "manifest.yaml")
}

// chain is the list of manifests from the root to this run.
func (r *run) chain() []string {
	if len(r.rec.Chain) > 0 {
		return r.rec.Chain
	}
	return []string{r.entry()}
}

// childRunID derives a child run's ID from its parent's, so resuming a
// parent finds the child it started instead of starting another.
func childRunID(parent string, task, attempt int) string {
	id := parent + "-a" + strconv.Itoa(task)
	if attempt > 1 {
		id += "r" + strconv.Itoa(attempt)
	}
	if len(id) > bus.MaxTokenLength {
		sum := sha256.Sum256([]byte(id))
		id = id[:bus.MaxTokenLength-25] + "-" + hex.EncodeToString(sum[:12])
	}
	return id
}

// Delivery of a child run's outcome to its parent. Each publication waits
// for the stream's acknowledgement; one that fails (a slow or leaderless
// server: "context deadline exceeded") is tried again, backing off from
// childOutcomeRetry to childOutcomeMaxRetry, for childOutcomeFor. Past that
// (or when the coordinator stops) the child run keeps its active mark and
// the recovery scan of any coordinator delivers it again (tryResume): a
// parent never waits for an outcome that was dropped. Copies are harmless:
// the message ID lets the stream drop them, and the parent ignores an
// outcome of a task no longer in flight.
var (
	childOutcomeRetry    = 250 * time.Millisecond
	childOutcomeMaxRetry = 5 * time.Second
	childOutcomeFor      = time.Minute
	// publishChildOutcome is the publication (a seam for tests that make
	// the server fail it).
	publishChildOutcome = func(ctx context.Context, b *bus.Bus, o bus.Outcome, msgID string) error {
		return b.PublishFact(ctx, o, msgID)
	}
)

// reportToParent answers the parent's apply task with this child run's
// outcome, through the parent's outcome stream like any worker outcome:
// any failure fails the apply, any change marks it changed, else stable.
// It returns false when the outcome is owed still (see childOutcomeFor):
// the caller then leaves the run's active mark for recovery.
func (r *run) reportToParent(ctx context.Context, rejected error) bool {
	rec := r.rec
	if rec.ParentRunID == "" {
		return true
	}
	o := bus.Outcome{RunID: rec.ParentRunID, Task: rec.ParentTask, Attempt: rec.ParentAttempt,
		Ref: "apply#" + rec.Manifest, Worker: "coordinator " + r.c.cfg.Name}
	if !rec.StartedAt.IsZero() && !rec.FinishedAt.IsZero() {
		o.DurationMS = rec.FinishedAt.Sub(rec.StartedAt).Milliseconds()
	}
	c := rec.Counts
	switch {
	case rejected != nil:
		o.Status, o.Error = bus.TaskFailed, rejected.Error()
		r.log.Error("apply failed: child manifest rejected", "error", rejected)
	case c.Failed > 0:
		o.Status = bus.TaskFailed
		o.Error = fmt.Sprintf("%d of %d child resources failed (%d changed, %d skipped)", c.Failed, c.Total, c.Changed, c.Skipped)
		r.log.Error("apply failed", "failed", c.Failed, "changed", c.Changed, "skipped", c.Skipped, "total", c.Total)
	case c.Changed > 0:
		o.Status, o.Changed = bus.TaskChanged, true
		o.Message = fmt.Sprintf("%d of %d child resources changed", c.Changed, c.Total)
		if rec.Request.Noop {
			o.Message = fmt.Sprintf("%d of %d child resources would change", c.Changed, c.Total)
			// A child put in noop by its apply resource changed nothing:
			// it must not make a non-noop parent's subscribers run.
			o.Changed = rec.ParentNoop
		}
		r.log.Warn("apply changed resources", "changed", c.Changed, "skipped", c.Total-c.Changed-c.Stable, "total", c.Total)
	default:
		o.Status = bus.TaskStable
		o.Message = fmt.Sprintf("all %d child resources in the desired state", c.Total)
		r.log.Info("apply: all child resources succeeded", "total", c.Total)
	}
	// A stopping coordinator still tries once; it does not try again.
	pctx := context.WithoutCancel(ctx)
	msgID := bus.TaskMsgID(rec.ParentRunID, rec.ParentTask, rec.ParentAttempt) + "/outcome"
	until, wait := time.Now().Add(childOutcomeFor), childOutcomeRetry
	for attempt := 1; ; attempt++ {
		secret, ok, err := r.parentSecret(pctx) // fold.go
		if err == nil && !ok {
			return true // the parent has ended: nothing is owed
		}
		if err == nil {
			bus.SignFact(&o, secret)
			if err = publishChildOutcome(pctx, r.c.bus, o, msgID); err == nil {
				if attempt > 1 {
					r.log.Info("child outcome delivered to the parent run", "attempts", attempt)
				}
				return true
			}
		}
		if ctx.Err() != nil || time.Now().Add(wait).After(until) {
			r.log.Error("child outcome not delivered to the parent run; the run stays marked active and the recovery scan delivers it again",
				"attempts", attempt, "error", err)
			return false
		}
		r.log.Warn("child outcome not delivered to the parent run; trying again", "attempt", attempt, "retry_in", wait, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, childOutcomeMaxRetry)
	}
}

// rejection is the error a rejected run ended with (finishRejected: it
// failed before any resource was counted), for delivering its outcome
// again; nil for a run that ran.
func (rec *record) rejection() error {
	if rec.Status == RunFailed && rec.Counts.Total == 0 && rec.Error != "" {
		return errors.New(rec.Error)
	}
	return nil
}

// denyApplies returns ErrApplyDenied naming the apply resources of a
// child manifest whose apply resource said allow_apply: false.
func denyApplies(refs []string) error {
	if len(refs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrApplyDenied, strings.Join(refs, ", "))
}
