package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The bus floor: the round trip a chained task rides on, with nothing of
// manifold. One process publishes a message of a task's size to a
// work-queue stream; another, holding one pull, takes it, publishes a
// reply to a second stream and acknowledges it; the first reads the reply
// with an ordered consumer and publishes two messages to a third stream
// (a task's two stored events). Both streams are file-backed, on the
// cluster's own server, as manifold's are. Per-task overhead below this
// p50 would need a bus other than JetStream.
//
//	benchrun bus-floor --server URL --role worker|client [--trips N]
const busFloorCommand = "bus-floor"

// BusFloor is the bare JetStream round trip: percentiles over Trips.
type BusFloor struct {
	Trips    int
	P50, P99 time.Duration
	Err      error
}

// Streams and subjects of the bus floor (removed after it).
const (
	floorTasks, floorReplies, floorEvents = "BENCH_FLOOR_TASKS", "BENCH_FLOOR_REPLIES", "BENCH_FLOOR_EVENTS"
	floorTaskSubject                      = "benchfloor.tasks"
	floorReplySubject                     = "benchfloor.replies"
	floorEventSubject                     = "benchfloor.events"
	// floorTaskBytes is about a chained file task's message.
	floorTaskBytes, floorEventBytes = 900, 350
	floorWarmup                     = 200
)

// floorResult is what the client role prints.
type floorResult struct {
	Trips int   `json:"trips"`
	P50NS int64 `json:"p50_ns"`
	P99NS int64 `json:"p99_ns"`
}

// busFloor measures the bus floor with trips round trips against c's
// server: the streams made here, the two roles as processes of the
// harness's own binary.
func (c *cluster) busFloor(ctx context.Context, trips int) *BusFloor {
	f := &BusFloor{Trips: trips}
	js, err := jetstream.New(c.nc)
	if err != nil {
		f.Err = err
		return f
	}
	for _, sc := range []jetstream.StreamConfig{
		{Name: floorTasks, Subjects: []string{floorTaskSubject}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage},
		{Name: floorReplies, Subjects: []string{floorReplySubject}, Storage: jetstream.FileStorage},
		{Name: floorEvents, Subjects: []string{floorEventSubject}, Storage: jetstream.FileStorage},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			f.Err = fmt.Errorf("bus floor: stream %s: %w", sc.Name, err)
			return f
		}
		defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), sc.Name) }()
	}
	worker := c.h.run.command(c.h.benchrun, busFloorCommand, "--server", c.url, "--role", "worker")
	var werr strings.Builder
	worker.Stderr = &werr
	if err := worker.Start(); err != nil {
		f.Err = fmt.Errorf("bus floor: start the worker: %w", err)
		return f
	}
	stopWorker := sync.OnceFunc(func() { _ = worker.Process.Kill(); _ = worker.Wait() })
	defer stopWorker()
	s := c.h.run.run(ctx, time.Minute, "", c.h.benchrun, busFloorCommand, "--server", c.url, "--role", "client", "--trips", fmt.Sprint(trips))
	if s.err != nil {
		stopWorker() // its stderr is complete (and no longer written) once it is waited for
		f.Err = fmt.Errorf("bus floor: %w (worker: %s)", s.err, oneLine(errors.New(werr.String())))
		return f
	}
	var r floorResult
	if err := json.Unmarshal([]byte(s.stdout), &r); err != nil {
		f.Err = fmt.Errorf("bus floor: client printed %q: %w", s.stdout, err)
		return f
	}
	f.Trips, f.P50, f.P99 = r.Trips, time.Duration(r.P50NS), time.Duration(r.P99NS)
	c.h.log.Info("bus floor", "p50", f.P50, "p99", f.P99, "trips", f.Trips)
	return f
}

// busFloorMain runs a role of the bus floor.
func busFloorMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchrun "+busFloorCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("server", "", "NATS URL")
	role := fs.String("role", "", "worker or client")
	trips := fs.Int("trips", 1000, "round trips measured (client)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *url == "" || (*role != "worker" && *role != "client") || *trips < 1 {
		fmt.Fprintln(stderr, "benchrun bus-floor: want --server URL, --role worker|client and --trips ≥ 1")
		return 2
	}
	nc, err := nats.Connect(*url)
	if err != nil {
		fmt.Fprintf(stderr, "benchrun bus-floor: %v\n", err)
		return 1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		if *role == "worker" {
			err = floorWorker(ctx, js)
		} else {
			var r floorResult
			if r, err = floorClient(ctx, nc, js, *trips); err == nil {
				err = json.NewEncoder(stdout).Encode(r)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchrun bus-floor %s: %v\n", *role, err)
		return 1
	}
	return 0
}

// floorWorker takes each task (one pull outstanding), publishes its reply
// and acknowledges it, until ctx ends.
func floorWorker(ctx context.Context, js jetstream.JetStream) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, floorTasks, jetstream.ConsumerConfig{Durable: "floor", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1))
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	reply := make([]byte, floorEventBytes)
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if _, err := js.PublishAsync(floorReplySubject, reply); err != nil {
			return err
		}
		if err := m.Ack(); err != nil {
			return err
		}
	}
}

// floorClient times floorWarmup+trips round trips and returns the
// percentiles of the last trips.
func floorClient(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, trips int) (floorResult, error) {
	cons, err := js.OrderedConsumer(ctx, floorReplies, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return floorResult{}, err
	}
	it, err := cons.Messages()
	if err != nil {
		return floorResult{}, err
	}
	defer it.Stop()
	task, event := make([]byte, floorTaskBytes), make([]byte, floorEventBytes)
	d := make([]time.Duration, 0, trips)
	for i := range floorWarmup + trips {
		t0 := time.Now()
		if _, err := js.PublishAsync(floorTaskSubject, task); err != nil {
			return floorResult{}, err
		}
		if _, err := it.Next(); err != nil {
			return floorResult{}, err
		}
		if i >= floorWarmup {
			d = append(d, time.Since(t0))
		}
		for range 2 { // the two stored events of a task, as the coordinator publishes them (no ack)
			if err := nc.Publish(floorEventSubject, event); err != nil {
				return floorResult{}, err
			}
		}
	}
	slices.Sort(d)
	return floorResult{Trips: trips, P50NS: int64(d[len(d)/2]), P99NS: int64(d[len(d)*99/100])}, nil
}
