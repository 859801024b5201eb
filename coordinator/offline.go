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

	"github.com/manifold-run/manifold/bus"
)

// recordOffline records a run a worker carried out from its cached plan
// while it could not reach the bus (bus.OfflineRun), reported on its
// convergence subject: an ordinary run record and report, final at once,
// marked offline and reported by the worker, with the trigger and the
// assignment it converged. It starts nothing.
//
// Trust: the record holds the worker's claims, as an outcome does. The
// coordinator checks what it can: the assignment is stored, the version
// reported is not newer than the stored one, the worker is live, in the
// assignment's pool and its where holds over the worker's published
// facts (as for a convergence run), the run is well formed and its ID
// names no other run. It cannot check that the resources changed as
// claimed: the run has no history, no task tokens and no trace. A worker
// is who its subject says it is only as far as the server's permissions
// tie a worker's credentials to its own subject.
func (a *api) recordOffline(ctx context.Context, workerName string, cr bus.ConvergeRequest) (any, *bus.APIError) {
	off := cr.Offline
	if off == nil {
		return nil, invalid(errors.New("trigger offline needs an offline run"))
	}
	if err := off.Validate(); err != nil {
		return nil, invalid(err)
	}
	if now := time.Now(); now.Sub(off.FinishedAt) > offlineAge || off.FinishedAt.Sub(now) > offlineSkew {
		return nil, invalid(fmt.Errorf("offline run %s: finished at %s: more than %s ago or %s ahead", off.RunID, off.FinishedAt.Format(time.RFC3339), offlineAge, offlineSkew))
	}
	rctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	asg, err := a.c.bus.GetAssignment(rctx, cr.Assignment)
	switch {
	case errors.Is(err, bus.ErrNotFound):
		return nil, &bus.APIError{Code: bus.APINotFound, Message: "no assignment " + cr.Assignment}
	case err != nil:
		return nil, unavailable(err)
	}
	if off.AssignmentVersion > asg.Version {
		return nil, invalid(fmt.Errorf("offline run %s: assignment %s has no version %d (stored: %d)", off.RunID, asg.Name, off.AssignmentVersion, asg.Version))
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
			return nil, invalid(fmt.Errorf("assignment %s: where %q does not hold over the facts of worker %s", asg.Name, asg.Where, workerName))
		}
	}
	if rec, _, err := loadRecord(rctx, a.c.bus.Runs(), off.RunID); err == nil {
		if rec.Request.Offline && rec.Request.ReportedBy == workerName && rec.Request.Assignment == asg.Name {
			return bus.ConvergeReply{RunID: rec.RunID, Ended: true, Status: string(rec.Status), Total: rec.Counts.Total}, nil // reported before
		}
		return nil, &bus.APIError{Code: bus.APIConflict, Message: "run " + off.RunID + " exists and is not an offline run of this worker"}
	} else if !errors.Is(err, bus.ErrNotFound) {
		return nil, unavailable(err)
	}
	rec, rep := offlineRecord(a.c.cfg.Name, workerName, asg, off)
	data, err := json.Marshal(rep)
	if err != nil {
		return nil, unavailable(err)
	}
	// The report first: a record whose report is missing would read as a
	// run rejected before it started.
	if err := a.c.bus.PutReport(rctx, rec.RunID, data); err != nil {
		return nil, unavailable(err)
	}
	hdr, err := json.Marshal(rec)
	if err != nil {
		return nil, unavailable(err)
	}
	if _, err := a.c.bus.Runs().Create(rctx, runKey(rec.RunID), hdr); errors.Is(err, bus.ErrExists) {
		return nil, &bus.APIError{Code: bus.APIConflict, Message: "run " + off.RunID + " was recorded meanwhile"}
	} else if err != nil {
		return nil, unavailable(err)
	}
	a.c.log.Info("offline run recorded", "run_id", rec.RunID, "assignment", asg.Name, "version", off.AssignmentVersion,
		"worker", workerName, "trigger", off.Trigger, "status", string(rec.Status), "changed", rec.Counts.Changed, "failed", rec.Counts.Failed)
	return bus.ConvergeReply{RunID: rec.RunID, Ended: true, Status: string(rec.Status), Total: rec.Counts.Total}, nil
}

// liveWorker reads a worker's entry in the workers bucket.
func (a *api) liveWorker(ctx context.Context, name string) (workerEntry, *bus.APIError) {
	var w workerEntry
	e, err := a.c.bus.Workers().Get(ctx, name)
	if errors.Is(err, bus.ErrNotFound) {
		return w, &bus.APIError{Code: bus.APINotFound, Message: "no live worker " + name}
	} else if err != nil {
		return w, unavailable(err)
	}
	if err := json.Unmarshal(e.Value, &w); err != nil {
		return w, unavailable(fmt.Errorf("worker %s: unreadable registration: %w", name, err))
	}
	return w, nil
}

// offlineRecord builds the final record and the report of an offline run.
func offlineRecord(coordinator, workerName string, asg bus.Assignment, off *bus.OfflineRun) (*record, *Report) {
	req := bus.RunRequest{
		V: bus.Version, RunID: off.RunID, Bundle: asg.Bundle, Entry: asg.Entry, ManifestName: off.Manifest,
		Noop: off.Noop, Pool: asg.Pool, PinWorker: workerName, Trigger: off.Trigger,
		Assignment: asg.Name, AssignmentVersion: off.AssignmentVersion, Offline: true, ReportedBy: workerName,
	}
	counts := Counts{Total: off.Total, Stable: off.Stable}
	resources := make([]ResourceReport, 0, len(off.Outcomes))
	for _, o := range off.Outcomes {
		typ, name, _ := strings.Cut(o.Ref, "#")
		resources = append(resources, ResourceReport{
			Ref: o.Ref, Type: typ, Name: name, Status: string(o.Status), Noop: off.Noop, Refreshed: o.Refreshed,
			Message: o.Message, Error: o.Error, DurationMS: o.DurationMS, Worker: workerName, Pool: bus.PinnedPool(workerName),
		})
		switch o.Status {
		case bus.TaskChanged:
			counts.Changed++
		case bus.TaskFailed:
			counts.Failed++
		case bus.TaskSkipped:
			counts.Skipped++
		case bus.TaskStable:
			counts.Stable++
		}
	}
	status, errText := RunSucceeded, ""
	if counts.Failed > 0 {
		status, errText = RunFailed, fmt.Sprintf("%d resources failed (offline run reported by worker %s)", counts.Failed, workerName)
	}
	if off.Omitted > 0 {
		errText = strings.TrimPrefix(errText+fmt.Sprintf("; %d more outcomes omitted by the worker", off.Omitted), "; ")
	}
	started, finished := off.StartedAt.UTC(), off.FinishedAt.UTC()
	rec := &record{
		V: 1, RunID: off.RunID, RootRunID: off.RunID, Request: req, Manifest: cmp.Or(off.Manifest, asg.ManifestName, "manifest.yaml"),
		Status: status, Error: errText, Owner: coordinator, Counts: counts,
		QueuedAt: started, StartedAt: started, FinishedAt: finished,
	}
	rep := rec.header()
	rep.Resources = resources
	return rec, rep
}

// offlineAge bounds how old a reported offline run may be: older ones are
// refused (a spool restored from an old backup). offlineSkew is how far
// in the future its end may be (the worker's clock).
const (
	offlineAge  = 30 * 24 * time.Hour
	offlineSkew = time.Hour
)
