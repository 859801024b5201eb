package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
)

// Bounds of how long a convergence request is held waiting for its run's
// end (ConvergeRequest.WaitMS): a reply comes at least that often, so a
// worker whose coordinator died asks another one soon.
const (
	defaultConvergeWait = 30 * time.Second
	maxConvergeWait     = 5 * time.Minute
)

// addConverge adds the endpoint workers ask for convergence runs of their
// assignments on: manifold.converge.<worker>. Its handler returns at once;
// the reply is sent when the run has ended (convergeRun), so a long run
// holds no other request up.
func (a *api) addConverge(ctx context.Context) error {
	return a.svc.AddEndpoint("converge", micro.HandlerFunc(func(req micro.Request) {
		a.mu.Lock()
		if a.closed || ctx.Err() != nil {
			a.mu.Unlock()
			respondError(req, &bus.APIError{Code: bus.APIUnavailable, Message: "coordinator is stopping"})
			return
		}
		a.inflight.Add(1)
		a.mu.Unlock()
		reply := detach(req, a.c.bus.Conn())
		go func() {
			defer a.inflight.Done()
			v, apiErr := a.converge(ctx, req)
			if apiErr != nil {
				respondError(reply, apiErr)
				return
			}
			if err := reply.RespondJSON(v); err != nil {
				a.c.log.Warn("api: converge reply not sent", "subject", req.Subject(), "error", err)
			}
		}()
	}), micro.WithEndpointSubject(bus.SubjectConvergeAll))
}

// detachedRequest answers a request after its handler returned. micro's
// request keeps its reply's error for the endpoint's statistics, which
// the service reads as the handler returns: a reply sent from another
// goroutine raced with that read (go test -race). Its replies are
// published on the request's reply subject as micro's are, headers
// included; they are not counted in the endpoint's statistics.
type detachedRequest struct {
	micro.Request
	nc    *nats.Conn
	reply string
}

// detach returns req answered through nc once its handler returned.
func detach(req micro.Request, nc *nats.Conn) micro.Request {
	return detachedRequest{Request: req, nc: nc, reply: req.Reply()}
}

func (r detachedRequest) publish(msg *nats.Msg, opts []micro.RespondOpt) error {
	if r.reply == "" {
		return nats.ErrMsgNoReply
	}
	msg.Subject = r.reply
	for _, opt := range opts {
		opt(msg)
	}
	return r.nc.PublishMsg(msg)
}

// Respond implements micro.Request.
func (r detachedRequest) Respond(data []byte, opts ...micro.RespondOpt) error {
	return r.publish(&nats.Msg{Data: data}, opts)
}

// RespondJSON implements micro.Request.
func (r detachedRequest) RespondJSON(v any, opts ...micro.RespondOpt) error {
	data, err := json.Marshal(v)
	if err != nil {
		return micro.ErrMarshalResponse
	}
	return r.Respond(data, opts...)
}

// Error implements micro.Request.
func (r detachedRequest) Error(code, description string, data []byte, opts ...micro.RespondOpt) error {
	if code == "" || description == "" {
		return fmt.Errorf("%w: error code and description", micro.ErrArgRequired)
	}
	return r.publish(&nats.Msg{Data: data, Header: nats.Header{micro.ErrorHeader: {description}, micro.ErrorCodeHeader: {code}}}, opts)
}

// workerEntry is what a convergence request needs of a worker's entry in
// the workers bucket.
type workerEntry struct {
	Pools []string       `json:"pools"`
	Facts map[string]any `json:"facts"`
}

// converge starts the convergence run a worker asks for and waits for its
// end. The run is built from the stored assignment alone (its bundle, data
// and noop), compiled with the worker's published facts, pinned to the
// worker and limited to req.Only: a worker can converge stored
// assignments of its pools on itself, never run a manifest of its own.
func (a *api) converge(ctx context.Context, req micro.Request) (any, *bus.APIError) {
	workerName := strings.TrimPrefix(req.Subject(), bus.SubjectConvergePrefix+".")
	if err := bus.ValidToken(workerName); err != nil {
		return nil, invalid(fmt.Errorf("worker: %w", err))
	}
	var cr bus.ConvergeRequest
	if e := decodeRequest(req, &cr); e != nil {
		return nil, e
	}
	if cr.Trigger == bus.TriggerOffline {
		return a.recordOffline(ctx, workerName, cr)
	}
	if !validTrigger(cr.Trigger) {
		return nil, invalid(fmt.Errorf("trigger %q: want start, assign, change, interval, drift or health", cr.Trigger))
	}
	if cr.WaitMS < 0 {
		return nil, invalid(errors.New("wait_ms must not be negative"))
	}
	wait := min(cmp.Or(time.Duration(cr.WaitMS)*time.Millisecond, defaultConvergeWait), maxConvergeWait)
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if cr.RunID != "" {
		return a.awaitConverge(ctx, rctx, workerName, cr, wait)
	}
	asg, err := a.c.bus.GetAssignment(rctx, cr.Assignment)
	switch {
	case errors.Is(err, bus.ErrNotFound):
		return nil, &bus.APIError{Code: bus.APINotFound, Message: "no assignment " + cr.Assignment}
	case err != nil:
		return nil, unavailable(err)
	}
	if cr.Version != asg.Version {
		return nil, &bus.APIError{Code: bus.APIConflict, Message: fmt.Sprintf("assignment %s is at version %d, not %d", asg.Name, asg.Version, cr.Version)}
	}
	w, apiErr := a.liveWorker(rctx, workerName)
	if apiErr != nil {
		return nil, apiErr
	}
	if !slices.Contains(w.Pools, asg.Pool) {
		return nil, invalid(fmt.Errorf("worker %s is not in pool %s of assignment %s", workerName, asg.Pool, asg.Name))
	}
	if asg.Where != "" {
		if ok, err := whereHolds(asg.Where, w.Facts); err != nil || !ok {
			why := "is false"
			if err != nil {
				why = "does not evaluate: " + err.Error()
			}
			return nil, invalid(fmt.Errorf("assignment %s: where %q %s over the facts of worker %s", asg.Name, asg.Where, why, workerName))
		}
	}
	rr := bus.RunRequest{
		V: bus.Version, RunID: NewRunID(), Bundle: asg.Bundle, Entry: asg.Entry, ManifestName: asg.ManifestName,
		Data: asg.Data, DataFile: asg.DataFile, Facts: w.Facts, Noop: asg.Noop, HealthCheckOnly: cr.HealthCheckOnly,
		Pool: asg.Pool, PinWorker: workerName, TaskTimeoutMS: asg.TaskTimeoutMS,
		Trigger: cr.Trigger, Assignment: asg.Name, AssignmentVersion: asg.Version, Only: cr.Only,
	}
	traceCtx := bus.ExtractTrace(context.Background(), nats.Header(req.Headers()))
	if err := a.c.accept(ctx, traceCtx, rr, nil); err != nil {
		return nil, unavailable(err)
	}
	a.c.log.Info("convergence run", "run_id", rr.RunID, "assignment", asg.Name, "version", asg.Version,
		"worker", workerName, "trigger", cr.Trigger, "only", len(cr.Only))
	return a.convergeEnd(ctx, rr.RunID, wait)
}

// awaitConverge answers a long poll for a convergence run started earlier
// for this worker and assignment.
func (a *api) awaitConverge(ctx, rctx context.Context, workerName string, cr bus.ConvergeRequest, wait time.Duration) (any, *bus.APIError) {
	if err := bus.ValidToken(cr.RunID); err != nil {
		return nil, invalid(fmt.Errorf("run_id: %w", err))
	}
	rec, _, err := loadRecord(rctx, a.c.bus.Runs(), cr.RunID)
	switch {
	case errors.Is(err, bus.ErrNotFound):
		return nil, &bus.APIError{Code: bus.APINotFound, Message: "no run " + cr.RunID}
	case err != nil:
		return nil, unavailable(err)
	}
	if rec.Request.PinWorker != workerName || rec.Request.Assignment != cr.Assignment {
		return nil, invalid(fmt.Errorf("run %s is not a convergence run of assignment %s on worker %s", cr.RunID, cr.Assignment, workerName))
	}
	return a.convergeEnd(ctx, cr.RunID, wait)
}

// convergeEnd waits up to wait for a run's end and sums it up; a run still
// going then is answered with Ended false.
func (a *api) convergeEnd(ctx context.Context, runID string, wait time.Duration) (any, *bus.APIError) {
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	if _, err := a.c.bus.Runs().WaitFor(wctx, runKey(runID), func(data []byte) bool {
		var rec record
		return decodeRecord(data, &rec) == nil && rec.Status.Final()
	}); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return bus.ConvergeReply{RunID: runID}, nil
		}
		return nil, unavailable(fmt.Errorf("run %s: %w", runID, err))
	}
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	rep, err := GetReport(rctx, a.c.bus, runID)
	if err != nil {
		return nil, unavailable(fmt.Errorf("run %s: report: %w", runID, err))
	}
	return ConvergeSummary(rep), nil
}

// ConvergeSummary sums a convergence run's report up for a convergence
// loop (a worker's, or apply --watch's): the resources changed, failed and
// stable, and whether a health check is CRITICAL.
func ConvergeSummary(rep *Report) bus.ConvergeReply {
	out := bus.ConvergeReply{RunID: rep.RunID, Ended: true, Status: string(rep.Status), Error: rep.Error, Total: len(rep.Resources)}
	for _, r := range rep.Resources {
		switch r.Status {
		case string(bus.TaskChanged):
			out.Changed = append(out.Changed, r.Ref)
		case string(bus.TaskFailed):
			out.Failed = append(out.Failed, r.Ref)
		case string(bus.TaskStable):
			out.Stable = append(out.Stable, r.Ref)
		}
		for _, hc := range r.HealthChecks {
			if hc.Status == string(resources.HealthCritical) && !hc.Ignored {
				out.Critical = true
			}
		}
	}
	return out
}

// whereHolds evaluates an assignment's where over a worker's facts, as
// the worker does (an expr-lang expression, bare or in template braces).
func whereHolds(where string, facts map[string]any) (bool, error) {
	expr := where
	if !template.HasTemplate(expr) {
		expr = "{{ " + expr + " }}"
	}
	v, err := template.Render(expr, template.Scope{Facts: facts})
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("gave %T %v, want a bool", v, v)
	}
	return b, nil
}

func validTrigger(t string) bool {
	switch t {
	case "start", "assign", "change", "interval", "drift", "health":
		return true
	}
	return false
}
