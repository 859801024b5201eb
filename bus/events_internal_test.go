package bus

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEventJSONMatchesMarshal: Event.appendJSON gives the bytes of
// json.Marshal for events of every shape: empty and full, strings that
// need escaping (quotes, HTML characters, control characters, UTF-8,
// U+2028, invalid UTF-8), a task of 0, negative numbers, times in other
// zones and outside the years time.Time.MarshalJSON accepts.
func TestEventJSONMatchesMarshal(t *testing.T) {
	zero, seven, neg := 0, 7, -3
	odd := []string{"", "plain", `quo"te`, `back\slash`, "<b>&amp;</b>", "line\nbreak\ttab\r", "\x01\x1f\x7f",
		"héllo wörld ✓", "sep\u2028par\u2029", "bad\xffutf8\xc3", "file#/etc/app.conf: updated content"}
	var events []Event
	events = append(events, Event{}, Event{Kind: EventRunStarted, RunID: "r", Total: 2000})
	for k, s := range odd {
		task := &zero
		if k%2 == 1 {
			task = &seven
		}
		events = append(events, Event{V: Version, Kind: EventTaskFinished, Time: time.Date(2026, 11, 27, 8, 40, 1, k*1111, time.UTC),
			RunID: s, RootRunID: s, Manifest: s, Task: task, Ref: s, Status: s, Message: s, Error: s, Worker: s,
			DurationMS: int64(k), Done: k, Total: 3 * k, Outcome: TaskStatus(s), Diff: s})
	}
	events = append(events,
		Event{Kind: EventKind("odd<kind>"), Task: &neg, DurationMS: -5, Done: -1, Total: -2,
			Time: time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -7*3600-30*60))},
		Event{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		Event{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
	)
	for _, ev := range events {
		want, wantErr := json.Marshal(ev)
		got, err := ev.appendJSON(nil)
		if wantErr != nil {
			require.Error(t, err, "%+v", ev)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%+v", ev)
		var back Event
		require.NoError(t, json.Unmarshal(got, &back))
	}
}

// BenchmarkEventJSON: a task_finished event encoded by appendJSON and by
// json.Marshal.
//
//	go test ./bus -run '^$' -bench EventJSON -benchmem
func BenchmarkEventJSON(b *testing.B) {
	i := 42
	ev := Event{V: Version, Kind: EventTaskFinished, Time: time.Now().UTC(), RunID: "20261127T084001Z-7b4ef191a0",
		RootRunID: "20261127T084001Z-7b4ef191a0", Manifest: "m.yaml", Task: &i, Ref: "file#/tmp/h6/f2000/d0/f42",
		Status: "stable", Worker: "worker-1", Done: 43, Total: 2000, Outcome: TaskStable}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ev.appendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
