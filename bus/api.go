package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The request-reply API: a NATS micro service named ServiceName whose
// endpoints take and return JSON. These names are part of the bus contract.
const (
	// ServiceName is the micro service every coordinator adds; requests are
	// spread over coordinators by the service's queue group.
	ServiceName = "manifold"
	// SubjectAPIRunsSubmit takes a RunRequest and replies SubmitReply.
	SubjectAPIRunsSubmit = SubjectAPIPrefix + ".runs.submit"
	// SubjectAPIRunsGet takes a GetRunRequest and replies the run report.
	SubjectAPIRunsGet = SubjectAPIPrefix + ".runs.get"
	// SubjectAPIRunsList takes a ListRunsRequest and replies ListRunsReply.
	SubjectAPIRunsList = SubjectAPIPrefix + ".runs.list"
	// SubjectAPIRunsCancel takes a CancelRunRequest and replies
	// CancelRunReply.
	SubjectAPIRunsCancel = SubjectAPIPrefix + ".runs.cancel"
	// SubjectAPIManifestsValidate takes a ValidateRequest and replies
	// ValidateReply.
	SubjectAPIManifestsValidate = SubjectAPIPrefix + ".manifests.validate"

	// SubjectControlPrefix is the root of core-NATS control messages
	// (not stored in any stream).
	SubjectControlPrefix = "manifold.control"
)

// CancelSubject returns the core-NATS subject announcing that a run was
// cancelled: manifold.control.<run>.cancel.
func CancelSubject(runID string) string { return SubjectControlPrefix + "." + token(runID) + ".cancel" }

// APIErrorCode classifies an API error reply.
type APIErrorCode string

// API error codes.
const (
	// APIInvalid: the request or its manifest does not validate.
	APIInvalid APIErrorCode = "invalid"
	// APINotFound: no such run.
	APINotFound APIErrorCode = "not_found"
	// APIConflict: the request does not apply to the run's state (for
	// example cancelling a run that has ended).
	APIConflict APIErrorCode = "conflict"
	// APIUnavailable: the coordinator could not carry the request out
	// (bus error, shutting down); retrying may work.
	APIUnavailable APIErrorCode = "unavailable"
)

// APIError is the error of a failed API request:
// {"error": {"code": "invalid", "message": "site.yaml:3:5: ..."}}.
type APIError struct {
	Code    APIErrorCode `json:"code"`
	Message string       `json:"message"`
	// Details lists every problem, one "file:line:col: path: message" each,
	// when there are several.
	Details []string `json:"details,omitempty"`
}

func (e *APIError) Error() string { return string(e.Code) + ": " + e.Message }

// ErrorReply wraps an APIError; every reply type embeds it so that a client
// can check Error first.
type ErrorReply struct {
	Error *APIError `json:"error,omitempty"`
}

// SubmitReply answers runs.submit: the run ID of the new run, or of the run
// an earlier request with the same idempotency key started.
type SubmitReply struct {
	RunID string `json:"run_id,omitempty"`
	// Duplicate is set when the idempotency key was seen before and RunID
	// is the earlier run's.
	Duplicate bool `json:"duplicate,omitempty"`
	ErrorReply
}

// GetRunRequest asks runs.get for a run's report (status queued or running
// until it ends).
type GetRunRequest struct {
	RunID string `json:"run_id"`
	// Offset and Limit page the report's resources: resources
	// [offset, offset+limit) are returned. Without a limit, as many as fit
	// in one reply (the server's maximum payload): every resource of all
	// but very large runs. A report cut short says so in its "page" field.
	Offset int `json:"offset,omitempty"`
	Limit  int `json:"limit,omitempty"`
}

// ListRunsRequest asks runs.list for the newest runs.
type ListRunsRequest struct {
	// Limit caps the runs listed. Defaults to 20.
	Limit int `json:"limit,omitempty"`
}

// RunCounts sums a run's resources by status (as in the run report).
type RunCounts struct {
	Total   int `json:"total"`
	Changed int `json:"changed"`
	Stable  int `json:"stable"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// RunSummary is one line of a run listing.
type RunSummary struct {
	RunID    string `json:"run_id"`
	Manifest string `json:"manifest"`
	Status   string `json:"status"`
	Noop     bool   `json:"noop"`
	Pool     string `json:"pool,omitempty"`
	// Trigger and Assignment: see RunRequest (convergence runs).
	Trigger    string `json:"trigger,omitempty"`
	Assignment string `json:"assignment,omitempty"`
	// Offline marks a run a worker carried out while cut off from the
	// bus and reported later (RunRequest.Offline).
	Offline    bool       `json:"offline,omitempty"`
	Counts     RunCounts  `json:"counts"`
	Error      string     `json:"error,omitempty"`
	QueuedAt   time.Time  `json:"queued_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// ListRunsReply answers runs.list, newest run first.
type ListRunsReply struct {
	Runs []RunSummary `json:"runs"`
	ErrorReply
}

// CancelRunRequest asks runs.cancel to cancel a run.
type CancelRunRequest struct {
	RunID string `json:"run_id"`
}

// CancelRunReply answers runs.cancel with the run's status afterwards
// ("cancelled", or the final status it already had).
type CancelRunReply struct {
	RunID  string `json:"run_id,omitempty"`
	Status string `json:"status,omitempty"`
	ErrorReply
}

// ValidateRequest asks manifests.validate to check a manifest without
// running it.
type ValidateRequest struct {
	ManifestYAML string         `json:"manifest_yaml"`
	ManifestName string         `json:"manifest_name,omitempty"`
	Data         map[string]any `json:"data,omitempty"`
}

// ValidateReply answers manifests.validate. An invalid manifest is not a
// failed request: Valid is false and Errors lists every problem.
type ValidateReply struct {
	Valid     bool     `json:"valid"`
	Resources int      `json:"resources,omitempty"`
	Errors    []string `json:"errors,omitempty"`
	ErrorReply
}

// Attach returns a Bus on the streams and buckets a coordinator provisioned
// earlier, without creating or changing any of them: clients and workers
// attach, coordinators Open. It returns an error wrapping ErrNotFound when
// the bus is not provisioned yet; any other error is a connection or
// permission problem.
func Attach(ctx context.Context, nc *nats.Conn, cfg Config) (*Bus, error) {
	cfg = cfg.WithDefaults()
	js, err := newJetStream(nc, cfg.Domain)
	if err != nil {
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	b := &Bus{nc: nc, js: js, cfg: cfg}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The lookups are sent at once, not one after another: a worker's
	// start waits for one round trip instead of seven (a fleet of 10,000
	// starts against a busy server). Errors are reported in this order.
	notFound := func(err error) error {
		if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			return ErrNotFound
		}
		return err
	}
	buckets := []struct {
		name string
		dst  **Bucket
	}{{BucketRuns, &b.runs}, {BucketWorkers, &b.workers}, {BucketResults, &b.results}, {BucketCancels, &b.cancels}}
	errs := make([]error, len(buckets)+2)
	var wg sync.WaitGroup
	for i, x := range buckets {
		wg.Go(func() {
			kv, err := js.KeyValue(ctx, x.name)
			if err != nil {
				errs[i] = fmt.Errorf("bus: attach to bucket %s: %w", x.name, notFound(err))
				return
			}
			*x.dst = &Bucket{kv: kv}
		})
	}
	// Heartbeats follow the TTL the workers bucket was provisioned with
	// (its stream's MaxAge), looked up beside the bucket, not after it.
	wg.Go(func() {
		if st, err := js.Stream(ctx, "KV_"+BucketWorkers); err == nil && st.CachedInfo().Config.MaxAge > 0 {
			b.cfg.WorkerTTL = st.CachedInfo().Config.MaxAge
		}
	})
	// Consumers must have their stream's replicas (work-queue streams
	// refuse others): take them from the tasks stream.
	wg.Go(func() {
		st, err := js.Stream(ctx, StreamTasks)
		if err != nil {
			errs[len(buckets)] = fmt.Errorf("bus: attach to stream %s: %w", StreamTasks, notFound(err))
			return
		}
		b.cfg.Replicas = max(st.CachedInfo().Config.Replicas, 1)
	})
	wg.Go(func() {
		var err error
		if b.bundles, err = js.ObjectStore(ctx, BucketBundles); err != nil {
			errs[len(buckets)+1] = fmt.Errorf("bus: attach to object store %s: %w", BucketBundles, notFound(err))
		}
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}
