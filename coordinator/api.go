package coordinator

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/schemas"
)

// apiTimeout bounds the bus operations of one API request.
const apiTimeout = 10 * time.Second

// api serves the micro service `manifold` for one coordinator. Every
// coordinator adds the service; the default queue group spreads requests
// over them.
type api struct {
	c   *Coordinator
	svc micro.Service

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

// startAPI adds the micro service on the coordinator's connection. Runs
// submitted through it are driven under ctx, the coordinator's lifetime
// context. The returned func stops the service and waits for requests in
// flight.
func (c *Coordinator) startAPI(ctx context.Context) (stop func(), err error) {
	a := &api{c: c}
	a.svc, err = micro.AddService(c.bus.Conn(), micro.Config{
		Name:        bus.ServiceName,
		Version:     "1.0.0",
		Description: "manifold runs: submit, get, list, cancel; manifest validation",
		Metadata:    map[string]string{"coordinator": c.cfg.Name},
	})
	if err != nil {
		return nil, fmt.Errorf("api: add service: %w", err)
	}
	endpoints := []struct {
		subject string
		handle  func(context.Context, micro.Request) (any, *bus.APIError)
	}{
		{bus.SubjectAPIRunsSubmit, a.submit},
		{bus.SubjectAPIRunsGet, a.get},
		{bus.SubjectAPIRunsList, a.list},
		{bus.SubjectAPIRunsCancel, a.cancel},
		{bus.SubjectAPIManifestsValidate, a.validate},
	}
	for _, e := range endpoints {
		name := strings.ReplaceAll(strings.TrimPrefix(e.subject, bus.SubjectAPIPrefix+"."), ".", "_")
		err := a.svc.AddEndpoint(name, micro.HandlerFunc(func(req micro.Request) { a.serve(ctx, req, e.handle) }),
			micro.WithEndpointSubject(e.subject))
		if err != nil {
			_ = a.svc.Stop()
			return nil, fmt.Errorf("api: endpoint %s: %w", e.subject, err)
		}
	}
	// Workers' convergence requests of their assignments (assign.go).
	if err := a.addConverge(ctx); err != nil {
		_ = a.svc.Stop()
		return nil, fmt.Errorf("api: endpoint %s: %w", bus.SubjectConvergeAll, err)
	}
	return a.stop, nil
}

func (a *api) stop() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	if err := a.svc.Stop(); err != nil {
		a.c.log.Warn("api: service not stopped cleanly", "error", err)
	}
	a.inflight.Wait()
}

// serve runs one handler and sends its reply: the value as JSON, or an
// error reply {"error": {...}} with the micro error headers set.
func (a *api) serve(ctx context.Context, req micro.Request, handle func(context.Context, micro.Request) (any, *bus.APIError)) {
	a.mu.Lock()
	if a.closed || ctx.Err() != nil {
		a.mu.Unlock()
		respondError(req, &bus.APIError{Code: bus.APIUnavailable, Message: "coordinator is stopping"})
		return
	}
	a.inflight.Add(1)
	a.mu.Unlock()
	defer a.inflight.Done()

	v, apiErr := handle(ctx, req)
	if apiErr != nil {
		respondError(req, apiErr)
		return
	}
	if err := req.RespondJSON(v); err != nil {
		a.c.log.Warn("api: reply not sent", "subject", req.Subject(), "error", err)
	}
}

func respondError(req micro.Request, e *bus.APIError) {
	code := map[bus.APIErrorCode]string{bus.APIInvalid: "400", bus.APINotFound: "404", bus.APIConflict: "409"}[e.Code]
	data, _ := json.Marshal(bus.ErrorReply{Error: e})
	// Header values are one line.
	desc, _, _ := strings.Cut(e.Message, "\n")
	_ = req.Error(cmp.Or(code, "503"), cmp.Or(desc, string(e.Code)), data)
}

func invalid(err error) *bus.APIError {
	e := &bus.APIError{Code: bus.APIInvalid, Message: err.Error()}
	var errs schemas.Errors
	if errors.As(err, &errs) && len(errs) > 0 {
		for _, x := range errs {
			e.Details = append(e.Details, x.Error())
		}
		e.Message = strings.Join(e.Details, "\n")
	}
	return e
}

func unavailable(err error) *bus.APIError {
	return &bus.APIError{Code: bus.APIUnavailable, Message: err.Error()}
}

func decodeRequest(req micro.Request, v any) *bus.APIError {
	if err := bus.DecodeStrict(req.Data(), v); err != nil {
		return &bus.APIError{Code: bus.APIInvalid, Message: "request body: " + err.Error()}
	}
	return nil
}

// checkManifest reads the manifest of a request (inline, or the entry of
// its bundle) and parses and prepares it as a root run would, returning
// the number of resources and the plan.
func (a *api) checkManifest(ctx context.Context, rr bus.RunRequest) (int, *Plan, error) {
	name := cmp.Or(rr.ManifestName, "manifest.yaml")
	src := []byte(rr.ManifestYAML)
	var files func(string) ([]byte, error)
	var b *bundle.Bundle
	switch {
	case rr.Bundle != "":
		var err error
		if b, err = a.c.bundle(ctx, rr.Bundle); err != nil {
			return 0, nil, err
		}
		entry := cmp.Or(rr.Entry, "manifest.yaml")
		files = bundleFiles(b, entry)
		if src, err = b.Read(entry); err != nil {
			return 0, nil, fmt.Errorf("bundle %s: %w", rr.Bundle, err)
		}
		if rr.ManifestName == "" {
			name = entry
		}
	case rr.ManifestYAML == "":
		return 0, nil, errors.New("run request carries no manifest: set manifest_yaml or bundle")
	}
	m, err := schemas.Parse(name, src)
	if err != nil {
		return 0, nil, err
	}
	data, err := runData(rr, b)
	if err != nil {
		return 0, nil, err
	}
	// A fan-out is checked here for what does not depend on the hosts'
	// facts; each host compiles it with its own (fanout.go).
	perHost := rr.EachWorker || rr.Where != ""
	p, err := PrepareWith(m, PrepareOpts{Overrides: data, Facts: rr.Facts, Source: src, Files: files, PerHost: perHost})
	if err != nil {
		return 0, nil, err
	}
	return len(m.Resources), p, nil
}

// idempotencyKey is the runs bucket key recording which run an idempotency
// key started (the same key accept writes).
func idempotencyKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "idem." + hex.EncodeToString(sum[:16])
}

// submit validates a run request and accepts it like the fire-and-forget
// intake does, replying with its run ID; a request whose idempotency key
// was seen before gets the earlier run's ID and starts nothing.
func (a *api) submit(ctx context.Context, req micro.Request) (any, *bus.APIError) {
	var rr bus.RunRequest
	if e := decodeRequest(req, &rr); e != nil {
		return nil, e
	}
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if rr.IdempotencyKey != "" {
		if id, ok, err := a.seen(rctx, rr.IdempotencyKey); err != nil {
			return nil, unavailable(err)
		} else if ok {
			return bus.SubmitReply{RunID: id, Duplicate: true}, nil
		}
	}
	if rr.RunID == "" {
		rr.RunID = NewRunID()
	}
	if err := bus.ValidToken(rr.RunID); err != nil {
		return nil, invalid(fmt.Errorf("run_id: %w", err))
	}
	if rr.Pool != "" {
		if err := bus.ValidToken(rr.Pool); err != nil {
			return nil, invalid(fmt.Errorf("pool: %w", err))
		}
	}
	if rr.MaxDepth < 0 || rr.TaskTimeoutMS < 0 {
		return nil, invalid(errors.New("max_depth and task_timeout_ms must not be negative"))
	}
	if err := a.c.checkPolicy(rr); err != nil {
		return nil, invalid(err)
	}
	if err := a.c.checkTargets(rctx, rr); err != nil {
		return nil, invalid(err)
	}
	_, plan, err := a.checkManifest(rctx, rr)
	if err != nil {
		if errors.Is(err, bus.ErrNotFound) {
			return nil, invalid(fmt.Errorf("bundle %s: %w", rr.Bundle, err))
		}
		return nil, invalid(err)
	}
	// The run starts from the plan it was checked with, not a second
	// compile, when that plan is the one loadPlan would make: a root run
	// (names, data and facts the same), not fanned out or pinned to a
	// worker (compiled per host) and not a subset (Only).
	if rr.EachWorker || rr.Where != "" || rr.PinWorker != "" || len(rr.Only) > 0 {
		plan = nil
	}
	if _, err := a.c.bus.Runs().Get(rctx, runKey(rr.RunID)); err == nil {
		return bus.SubmitReply{RunID: rr.RunID, Duplicate: true}, nil
	}
	traceCtx := bus.ExtractTrace(context.Background(), nats.Header(req.Headers()))
	// accept drives the run under the coordinator's lifetime context, not
	// this request's.
	if err := a.c.acceptPrepared(ctx, traceCtx, rr, nil, plan); err != nil {
		return nil, unavailable(err)
	}
	if rr.IdempotencyKey != "" {
		// A concurrent request with the same key may have won the race.
		if id, ok, err := a.seen(rctx, rr.IdempotencyKey); err == nil && ok && id != rr.RunID {
			return bus.SubmitReply{RunID: id, Duplicate: true}, nil
		}
	}
	return bus.SubmitReply{RunID: rr.RunID}, nil
}

// seen returns the run an idempotency key started, if any.
func (a *api) seen(ctx context.Context, key string) (string, bool, error) {
	e, err := a.c.bus.Runs().Get(ctx, idempotencyKey(key))
	if errors.Is(err, bus.ErrNotFound) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	return string(e.Value), true, nil
}

func (a *api) get(ctx context.Context, req micro.Request) (any, *bus.APIError) {
	var g bus.GetRunRequest
	if e := decodeRequest(req, &g); e != nil {
		return nil, e
	}
	if err := bus.ValidToken(g.RunID); err != nil {
		return nil, invalid(fmt.Errorf("run_id: %w", err))
	}
	if g.Offset < 0 || g.Limit < 0 {
		return nil, invalid(fmt.Errorf("offset and limit must not be negative (got %d and %d)", g.Offset, g.Limit))
	}
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	rep, err := GetReport(rctx, a.c.bus, g.RunID)
	if errors.Is(err, bus.ErrNotFound) {
		return nil, &bus.APIError{Code: bus.APINotFound, Message: "no run " + g.RunID}
	} else if err != nil {
		return nil, unavailable(err)
	}
	return pageReport(rep, g.Offset, g.Limit, int(a.c.bus.Conn().MaxPayload())-replyMargin), nil
}

// replyMargin is room left in a reply for the report's other fields and
// the reply's headers.
const replyMargin = 64 << 10

// pageReport cuts rep's resources to [offset, offset+limit), and further
// to what fits in max bytes of JSON; the whole report when no paging was
// asked for and it fits.
func pageReport(rep *Report, offset, limit, max int) *Report {
	total := len(rep.Resources)
	if offset == 0 && limit == 0 {
		if b, err := json.Marshal(rep.Resources); err == nil && len(b) <= max {
			return rep
		}
	}
	start := min(offset, total)
	end := total
	if limit > 0 {
		end = min(total, start+limit)
	}
	size := 0
	for i := start; i < end; i++ {
		b, err := json.Marshal(rep.Resources[i])
		if err != nil {
			continue
		}
		if size+len(b)+1 > max && i > start {
			end = i
			break
		}
		size += len(b) + 1
	}
	out := *rep
	out.Resources = rep.Resources[start:end]
	out.Page = &ReportPage{Offset: start, Count: end - start, Total: total}
	if end < total {
		next := end
		out.Page.NextOffset = &next
	}
	return &out
}

func (a *api) list(ctx context.Context, req micro.Request) (any, *bus.APIError) {
	var l bus.ListRunsRequest
	if len(req.Data()) > 0 {
		if e := decodeRequest(req, &l); e != nil {
			return nil, e
		}
	}
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	runs, err := ListRuns(rctx, a.c.bus, l.Limit)
	if err != nil {
		return nil, unavailable(err)
	}
	return bus.ListRunsReply{Runs: runs}, nil
}

func (a *api) cancel(ctx context.Context, req micro.Request) (any, *bus.APIError) {
	var cr bus.CancelRunRequest
	if e := decodeRequest(req, &cr); e != nil {
		return nil, e
	}
	if err := bus.ValidToken(cr.RunID); err != nil {
		return nil, invalid(fmt.Errorf("run_id: %w", err))
	}
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	status, err := a.c.cancelRun(rctx, cr.RunID)
	switch {
	case errors.Is(err, bus.ErrNotFound):
		return nil, &bus.APIError{Code: bus.APINotFound, Message: "no run " + cr.RunID}
	case errors.Is(err, ErrRunEnded):
		return nil, &bus.APIError{Code: bus.APIConflict, Message: fmt.Sprintf("run %s has already ended: %s", cr.RunID, status)}
	case err != nil:
		return nil, unavailable(err)
	}
	return bus.CancelRunReply{RunID: cr.RunID, Status: string(status)}, nil
}

func (a *api) validate(ctx context.Context, req micro.Request) (any, *bus.APIError) {
	var v bus.ValidateRequest
	if e := decodeRequest(req, &v); e != nil {
		return nil, e
	}
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	n, _, err := a.checkManifest(rctx, bus.RunRequest{ManifestYAML: v.ManifestYAML, ManifestName: v.ManifestName, Data: v.Data})
	if err != nil {
		e := invalid(err)
		if e.Details == nil {
			e.Details = []string{e.Message}
		}
		return bus.ValidateReply{Valid: false, Errors: e.Details}, nil
	}
	return bus.ValidateReply{Valid: true, Resources: n}, nil
}
