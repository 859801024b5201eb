package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// Config sets how the streams, buckets and consumers are provisioned. Zero
// values take the defaults documented on each field.
type Config struct {
	// Replicas of every stream and bucket: 1 for a single server, 3 in a
	// cluster. Defaults to 1.
	Replicas int
	// WorkerTTL is how long a worker registration lives without a
	// heartbeat: how long a worker that died without deregistering is
	// still taken as live (a fan-out's targets, `manifold workers`). A
	// worker writes its entry when it changed and every WorkerTTL/3 in
	// any case. Defaults to 60s (15s before 2026-11-27: 200 writes a
	// second per 1,000 idle workers, now 50).
	WorkerTTL time.Duration
	// TaskAckWait is how long a worker may hold a task without acking or
	// sending progress before it is redelivered. Defaults to 30s.
	TaskAckWait time.Duration
	// TaskMaxDeliver caps deliveries of one task message. Defaults to 5.
	TaskMaxDeliver int
	// EventsMaxAge is how long progress events are kept. Defaults to 24h.
	EventsMaxAge time.Duration
	// ResultsTTL is how long finished task outcomes are remembered for
	// redeliveries. Defaults to 24h.
	ResultsTTL time.Duration
	// CancelsTTL is how long a run's cancellation is kept in
	// BucketCancels for workers to drop its queued tasks; it must outlast
	// the longest task deadline. Defaults to 24h.
	CancelsTTL time.Duration
	// DuplicateWindow is the window in which a run request with the same
	// Nats-Msg-Id is dropped. Defaults to 2m.
	DuplicateWindow time.Duration
	// InlineMax is the largest task published as a message; larger ones
	// travel by reference (Task.Ref). Defaults to the server's maximum
	// payload less 16 KiB.
	InlineMax int
	// MaxBundleBytes caps one bundle in the object store. Defaults to 64 MiB.
	MaxBundleBytes int64
	// HistoryMaxAge bounds how long a run's history is kept if the run
	// never ends (its coordinators are all gone for good); an ended run's
	// history is removed at once. Defaults to 7 days.
	HistoryMaxAge time.Duration
	// MemoryStorage keeps every stream and bucket in memory instead of
	// files: for the embedded engine of `manifold apply`, whose store is
	// private to the process and removed when it exits.
	MemoryStorage bool
	// PoolMaxWaiting is how many pull requests a pool's consumer holds
	// at once: one per idle worker of the pool, so it must exceed the
	// largest pool (past it the server refuses pulls with 409 Exceeded
	// MaxWaiting and workers back off). Set when the consumer is created:
	// an existing consumer keeps its own (docs/fleet-scale.md). Defaults
	// to 65536.
	PoolMaxWaiting int
	// Fresh says the server is new and holds none of manifold's streams
	// (the embedded engine's private server): each stream, bucket and
	// object store is created with one call instead of an update that
	// fails first (one to three round trips fewer each: about half the
	// calls), and no stream of an earlier version is looked for. On a server
	// that holds one with another configuration, Open fails with
	// jetstream.ErrStreamNameAlreadyInUse.
	Fresh bool
	// OnDemand leaves what few runs need to be created by this bus on
	// first use rather than by Open: the assignments bucket, the store of
	// tasks sent by reference, the reports store (the embedded engine
	// keeps its root run's report: only child runs' are stored) and the
	// registrations stream (register_when_stable): four of Open's
	// fourteen creates, each some 0.3 ms of the embedded engine's start.
	// Only for a server no other bus uses (the embedded engine's private
	// one, with Fresh): another bus would not find them.
	OnDemand bool
	// Domain is the JetStream domain manifold's streams and buckets live
	// in, for a client connected to a leafnode server of another domain
	// (a site's): its JetStream calls go to $JS.<Domain>.API. Empty uses
	// the JetStream of the server the client is connected to.
	Domain string
}

// DefaultWorkerTTL is the default of Config.WorkerTTL.
const DefaultWorkerTTL = 60 * time.Second

// WithDefaults returns cfg with every zero field set to its default.
func (cfg Config) WithDefaults() Config {
	cfg.Replicas = max(cfg.Replicas, 1)
	cfg.WorkerTTL = durationOr(cfg.WorkerTTL, DefaultWorkerTTL)
	cfg.TaskAckWait = durationOr(cfg.TaskAckWait, 30*time.Second)
	if cfg.TaskMaxDeliver <= 0 {
		cfg.TaskMaxDeliver = 5
	}
	cfg.EventsMaxAge = durationOr(cfg.EventsMaxAge, 24*time.Hour)
	cfg.ResultsTTL = durationOr(cfg.ResultsTTL, 24*time.Hour)
	cfg.DuplicateWindow = durationOr(cfg.DuplicateWindow, 2*time.Minute)
	cfg.CancelsTTL = durationOr(cfg.CancelsTTL, 24*time.Hour)
	if cfg.MaxBundleBytes <= 0 {
		cfg.MaxBundleBytes = 64 << 20
	}
	cfg.HistoryMaxAge = durationOr(cfg.HistoryMaxAge, 7*24*time.Hour)
	if cfg.PoolMaxWaiting <= 0 {
		cfg.PoolMaxWaiting = 65536
	}
	return cfg
}

// Bus is a provisioned connection to manifold's streams, buckets and object
// store. It is safe for concurrent use.
type Bus struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	cfg       Config
	runs      *Bucket
	workers   *Bucket
	results   *Bucket
	cancels   *Bucket
	bundles   jetstream.ObjectStore
	reportsMu sync.Mutex
	reports   jetstream.ObjectStore
	tasks     jetstream.ObjectStore
	// reportNUIDs: the chunk subjects of the reports PutReport stored,
	// for PurgeReport (reportput.go).
	reportNUIDs reportNUIDs

	assignMu    sync.Mutex
	assignments *Bucket // opened on first use when attached (assignments.go)

	// registrations says the registrations stream is there (OnDemand:
	// created on first use, registrations.go).
	regMu         sync.Mutex
	registrations bool

	// local holds, by name, the bundles KeepBundle keeps.
	localMu sync.Mutex
	local   map[string][]byte
}

// Open provisions (idempotently) everything manifold needs on the server
// behind nc and returns the Bus. In a cluster it retries while the
// JetStream meta leader is being elected, until ctx ends.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Bus, error) {
	cfg = cfg.WithDefaults()
	js, err := newJetStream(nc, cfg.Domain)
	if err != nil {
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	b := &Bus{nc: nc, js: js, cfg: cfg}
	for {
		err = b.provision(ctx)
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// newJetStream returns the JetStream of domain (empty: the connected
// server's).
func newJetStream(nc *nats.Conn, domain string) (jetstream.JetStream, error) {
	if domain != "" {
		return jetstream.NewWithDomain(nc, domain)
	}
	return jetstream.New(nc)
}

func retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

func (b *Bus) provision(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, storage := b.cfg.Replicas, b.storage()
	createStream, createKV, createObjects := b.js.CreateOrUpdateStream, b.js.CreateOrUpdateKeyValue, b.js.CreateOrUpdateObjectStore
	if b.cfg.Fresh {
		createStream, createKV, createObjects = b.js.CreateStream, b.js.CreateKeyValue, b.js.CreateObjectStore
	} else if err := b.js.DeleteStream(ctx, StreamOutcomes); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		// The work-queue outcome stream of earlier versions holds the
		// subjects of the history stream: remove it (outcomes in it
		// belonged to runs that cannot be resumed by this version anyway).
		return fmt.Errorf("bus: remove stream %s: %w", StreamOutcomes, err)
	}
	streams := []jetstream.StreamConfig{
		{Name: StreamRuns, Subjects: []string{SubjectRunSubmit}, Retention: jetstream.WorkQueuePolicy,
			Duplicates: b.cfg.DuplicateWindow, Replicas: r, Description: "manifold run requests"},
		{Name: StreamTasks, Subjects: []string{SubjectTasksAll}, Retention: jetstream.WorkQueuePolicy,
			Duplicates: b.cfg.DuplicateWindow, Replicas: r, Description: "manifold resource tasks"},
		{Name: StreamPinned, Subjects: []string{SubjectPinnedAll}, Retention: jetstream.WorkQueuePolicy,
			Duplicates: b.cfg.DuplicateWindow, Replicas: r, Description: "manifold tasks pinned to one worker (read by subject, no consumer)"},
		{Name: StreamHistory, Subjects: []string{SubjectOutcomesAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: b.cfg.HistoryMaxAge, Duplicates: b.cfg.DuplicateWindow, Replicas: r,
			Description: "manifold run histories: task outcomes, deadlines, cancellations"},
		{Name: StreamEvents, Subjects: []string{SubjectEventsAll}, Retention: jetstream.LimitsPolicy,
			MaxAge: b.cfg.EventsMaxAge, Replicas: r, Description: "manifold progress events"},
	}
	if !b.cfg.OnDemand {
		streams = append(streams, registrationsStream(b.cfg)) // registrations.go
	}
	// Created side by side: each is a round trip to the meta leader, and
	// the embedded engine of `manifold apply` waits for all of them.
	var g errgroup.Group
	for _, sc := range streams {
		sc.Storage = storage
		g.Go(func() error {
			if _, err := createStream(ctx, sc); err != nil {
				return fmt.Errorf("bus: provision stream %s: %w", sc.Name, err)
			}
			return nil
		})
	}
	bucket := func(dst **Bucket, cfg jetstream.KeyValueConfig) {
		g.Go(func() error {
			kv, err := createKV(ctx, cfg)
			if err != nil {
				return fmt.Errorf("bus: provision bucket %s: %w", cfg.Bucket, err)
			}
			*dst = &Bucket{kv: kv}
			return nil
		})
	}
	bucket(&b.runs, jetstream.KeyValueConfig{Bucket: BucketRuns, History: 1, Replicas: r, Storage: storage,
		Description: "manifold run records"})
	bucket(&b.workers, jetstream.KeyValueConfig{Bucket: BucketWorkers, TTL: b.cfg.WorkerTTL,
		Replicas: r, Storage: storage, Description: "manifold live workers"})
	bucket(&b.results, jetstream.KeyValueConfig{Bucket: BucketResults, TTL: b.cfg.ResultsTTL,
		Replicas: r, Storage: storage, Description: "manifold finished task outcomes"})
	bucket(&b.cancels, jetstream.KeyValueConfig{Bucket: BucketCancels, TTL: b.cfg.CancelsTTL,
		Replicas: r, Storage: storage, Description: "manifold cancelled runs (workers drop their queued tasks)"})
	if !b.cfg.OnDemand {
		bucket(&b.assignments, b.assignmentsConfig())
	}
	objects := func(dst *jetstream.ObjectStore, cfg jetstream.ObjectStoreConfig) {
		g.Go(func() (err error) {
			if *dst, err = createObjects(ctx, cfg); err != nil {
				return fmt.Errorf("bus: provision object store %s: %w", cfg.Bucket, err)
			}
			return nil
		})
	}
	objects(&b.bundles, jetstream.ObjectStoreConfig{Bucket: BucketBundles,
		Replicas: r, Storage: storage, Description: "manifold manifest bundles"})
	if !b.cfg.OnDemand {
		objects(&b.reports, b.reportStoreConfig())
		objects(&b.tasks, b.taskStoreConfig())
	}
	return g.Wait()
}

// storage is the storage of the bus's streams, buckets and object stores.
func (b *Bus) storage() jetstream.StorageType {
	if b.cfg.MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

func (b *Bus) assignmentsConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: BucketAssignments, History: 1, Replicas: b.cfg.Replicas, Storage: b.storage(),
		Description: "manifold assignments: desired state workers keep converged"}
}

func (b *Bus) reportStoreConfig() jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{Bucket: BucketReports, Replicas: b.cfg.Replicas, Storage: b.storage(),
		Description: "manifold reports of finished runs"}
}

func (b *Bus) taskStoreConfig() jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{Bucket: BucketTasks, TTL: b.cfg.HistoryMaxAge, Replicas: b.cfg.Replicas, Storage: b.storage(),
		Description: "manifold tasks sent by reference (coordinators write)"}
}

func (b *Bus) bucket(ctx context.Context, cfg jetstream.KeyValueConfig) (*Bucket, error) {
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bus: provision bucket %s: %w", cfg.Bucket, err)
	}
	return &Bucket{kv: kv}, nil
}

// Conn returns the underlying NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// Config returns the configuration the bus was opened with, defaults set.
func (b *Bus) Config() Config { return b.cfg }

// Runs returns the bucket of run records.
func (b *Bus) Runs() *Bucket { return b.runs }

// Workers returns the bucket of live workers.
func (b *Bus) Workers() *Bucket { return b.workers }

// Results returns the bucket of finished task outcomes.
func (b *Bus) Results() *Bucket { return b.results }

// TaskMsgID returns the message ID of a task attempt: "<run>/<task>/<attempt>".
func TaskMsgID(runID string, task, attempt int) string {
	return runID + "/" + strconv.Itoa(task) + "/" + strconv.Itoa(attempt)
}

// publish marshals v and publishes it to subject, waiting for the stream's
// acknowledgement (the message is durable when this returns nil).
func (b *Bus) publish(ctx context.Context, subject, msgID string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("bus: encode %s: %w", subject, err)
	}
	return b.publishData(ctx, subject, msgID, data, ctx)
}

// publishData publishes data with the trace context of traceCtx and waits
// for the stream's acknowledgement, retrying while no leader answers.
func (b *Bus) publishData(ctx context.Context, subject, msgID string, data []byte, traceCtx context.Context) error {
	msg := nats.NewMsg(subject)
	msg.Data = data
	InjectTrace(traceCtx, msg.Header)
	opts := []jetstream.PublishOpt{jetstream.WithRetryAttempts(int(noLeaderWait / noLeaderRetry)), jetstream.WithRetryWait(noLeaderRetry)}
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := b.js.PublishMsg(ctx, msg, opts...); err != nil {
		return fmt.Errorf("bus: publish %s: %w", subject, err)
	}
	return nil
}

// SubmitRun publishes a run request on SubjectRunSubmit. msgID (usually the
// idempotency key) lets the stream drop duplicates.
func (b *Bus) SubmitRun(ctx context.Context, req RunRequest, msgID string) error {
	req.V = Version
	return b.publish(ctx, SubjectRunSubmit, msgID, req)
}

// PublishTask publishes a task on its pool's subject with its message ID.
func (b *Bus) PublishTask(ctx context.Context, t Task) error {
	t.V = Version
	if err := ValidToken(t.Pool); err != nil {
		return fmt.Errorf("bus: pool name: %w", err)
	}
	return b.publish(ctx, TaskSubject(t.Pool), t.MsgID(), t)
}

// PublishOutcome publishes a task outcome and returns once it is durable.
func (b *Bus) PublishOutcome(ctx context.Context, o Outcome) error {
	o.V = Version
	return b.publish(ctx, OutcomeSubject(o.RunID), "", o)
}

// PublishEvent publishes a progress event.
func (b *Bus) PublishEvent(ctx context.Context, ev Event) error {
	subject, data, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	return b.publishData(ctx, subject, "", data, ctx)
}

// Decode unmarshals a message envelope and checks its version. Messages
// are decoded once: the version is read from the decoded value's V field
// when it has one (every message type does), and probed apart only for
// other targets or when decoding failed (a message of another version may
// not fit this build's types: the version error says why).
func Decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		if ver, ok := probeVersion(data); ok && ver != 0 && ver != Version {
			return fmt.Errorf("%w: %d (this build speaks %d)", ErrVersion, ver, Version)
		}
		return fmt.Errorf("bus: decode message: %w", err)
	}
	ver, ok := versionField(v)
	if !ok {
		if ver, ok = probeVersion(data); !ok {
			return nil
		}
	}
	if ver != 0 && ver != Version {
		return fmt.Errorf("%w: %d (this build speaks %d)", ErrVersion, ver, Version)
	}
	return nil
}

// probeVersion reads the envelope's "v" alone.
func probeVersion(data []byte) (int, bool) {
	var env struct {
		V int `json:"v"`
	}
	if json.Unmarshal(data, &env) != nil {
		return 0, false
	}
	return env.V, true
}

// versionFields caches, per struct type, the index of its int field V.
var versionFields sync.Map // reflect.Type -> int (-1: none)

// versionField returns the V field of *struct v.
func versionField(v any) (int, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return 0, false
	}
	rv = rv.Elem()
	t := rv.Type()
	idx, ok := versionFields.Load(t)
	if !ok {
		i := -1
		if f, found := t.FieldByName("V"); found && len(f.Index) == 1 && f.Type.Kind() == reflect.Int && strings.Split(f.Tag.Get("json"), ",")[0] == "v" {
			i = f.Index[0]
		}
		versionFields.Store(t, i)
		idx = i
	}
	if idx.(int) < 0 {
		return 0, false
	}
	return int(rv.Field(idx.(int)).Int()), true
}

// DecodeStrict is Decode for requests from clients: a field v's type does
// not have (a misspelt "nooop") or data after the JSON value is an error,
// never silently ignored. The envelope's "v" is accepted on every request.
// So is a key repeated in an object or a field's name in another case
// ({"noop": true, "NOOP": false}): ErrAmbiguousKey.
func DecodeStrict(data []byte, v any) error {
	if err := checkKeys(data, v); err != nil {
		return fmt.Errorf("bus: decode message: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := Decode(data, &fields); err != nil {
		return err
	}
	if fields == nil {
		return errors.New("bus: decode message: want a JSON object, got null")
	}
	delete(fields, "v")
	norm, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("bus: decode message: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(norm))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bus: decode message: %w", err)
	}
	return nil
}
