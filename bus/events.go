package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// FollowEvents delivers every event of a run tree (runID is its root),
// from the first, to fn in order until fn returns false or ctx ends. With
// kinds, only the root run's events of those kinds are delivered (the
// server filters: a client printing no progress is not sent an event per
// resource). It returns nil when fn stopped it, ctx's error otherwise.
func (b *Bus) FollowEvents(ctx context.Context, runID string, fn func(Event) bool, kinds ...EventKind) error {
	filter := []string{EventsOfRun(runID)}
	if len(kinds) > 0 {
		filter = filter[:0]
		for _, k := range kinds {
			filter = append(filter, EventSubject(runID, runID, k))
		}
	}
	return b.followEvents(ctx, runID, filter, fn)
}

// FollowTreeEvents is FollowEvents with kinds filtering the events of
// every run of the tree, child runs included: a follower that prints no
// status line needs no task_dispatched event, and the server sends it
// none. Without kinds it is FollowEvents.
func (b *Bus) FollowTreeEvents(ctx context.Context, runID string, fn func(Event) bool, kinds ...EventKind) error {
	filter := []string{EventsOfRun(runID)}
	if len(kinds) > 0 {
		filter = filter[:0]
		for _, k := range kinds {
			filter = append(filter, eventsOfKind(runID, k))
		}
	}
	return b.followEvents(ctx, runID, filter, fn)
}

func (b *Bus) followEvents(ctx context.Context, runID string, filter []string, fn func(Event) bool) error {
	c, err := b.js.OrderedConsumer(ctx, StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: filter,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("bus: follow events of %s: %w", runID, err)
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("bus: follow events of %s: %w", runID, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("bus: follow events of %s: %w", runID, err)
		}
		var ev Event
		if err := Decode(msg.Data(), &ev); err != nil {
			continue // an event this build cannot read is not a reason to stop following
		}
		if !fn(ev) {
			return nil
		}
	}
}

// eventsOfKind returns the subject filter matching the events of one
// kind of every run of a run tree, given its root run ID.
func eventsOfKind(rootRunID string, kind EventKind) string {
	return "manifold.events." + token(rootRunID) + ".*." + token(string(kind))
}

// appendJSON appends ev's JSON encoding to buf: the bytes json.Marshal
// gives (TestEventJSONMatchesMarshal), without its reflection: two events
// per resource are encoded by a coordinator.
func (ev *Event) appendJSON(buf []byte) ([]byte, error) {
	if y := ev.Time.Year(); y < 0 || y > 9999 {
		// time.Time.MarshalJSON refuses it: let json.Marshal say so.
		return encode(ev)
	}
	if buf == nil {
		buf = make([]byte, 0, 256+len(ev.RunID)+len(ev.RootRunID)+len(ev.Manifest)+len(ev.Ref)+len(ev.Message)+len(ev.Error)+len(ev.Diff))
	}
	buf = append(buf, `{"v":`...)
	buf = strconv.AppendInt(buf, int64(ev.V), 10)
	buf = appendJSONField(buf, `,"kind":`, string(ev.Kind), false)
	buf = append(buf, `,"time":"`...)
	buf = ev.Time.AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, '"')
	buf = appendJSONField(buf, `,"run_id":`, ev.RunID, false)
	buf = appendJSONField(buf, `,"root_run_id":`, ev.RootRunID, true)
	buf = appendJSONField(buf, `,"manifest":`, ev.Manifest, true)
	if ev.Task != nil {
		buf = append(buf, `,"task":`...)
		buf = strconv.AppendInt(buf, int64(*ev.Task), 10)
	}
	buf = appendJSONField(buf, `,"ref":`, ev.Ref, true)
	buf = appendJSONField(buf, `,"status":`, ev.Status, true)
	buf = appendJSONField(buf, `,"message":`, ev.Message, true)
	buf = appendJSONField(buf, `,"error":`, ev.Error, true)
	buf = appendJSONField(buf, `,"worker":`, ev.Worker, true)
	buf = appendJSONInt(buf, `,"duration_ms":`, ev.DurationMS)
	buf = appendJSONInt(buf, `,"done":`, int64(ev.Done))
	buf = appendJSONInt(buf, `,"total":`, int64(ev.Total))
	buf = appendJSONField(buf, `,"outcome":`, string(ev.Outcome), true)
	buf = appendJSONField(buf, `,"diff":`, ev.Diff, true)
	return append(buf, '}'), nil
}

// appendJSONInt appends name and v unless v is 0 (omitempty).
func appendJSONInt(buf []byte, name string, v int64) []byte {
	if v == 0 {
		return buf
	}
	return strconv.AppendInt(append(buf, name...), v, 10)
}

// appendJSONField appends name and s as a JSON string (nothing when
// omitEmpty and s is empty), escaped as json.Marshal escapes it.
func appendJSONField(buf []byte, name, s string, omitEmpty bool) []byte {
	if omitEmpty && s == "" {
		return buf
	}
	buf = append(buf, name...)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			// Escapes, HTML characters, UTF-8: json.Marshal's rules.
			q, _ := json.Marshal(s)
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
