package bus

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestSubjectsOverlap: two filters overlap when one subject matches both.
func TestSubjectsOverlap(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"manifold.events.r.>", "manifold.events.r.>", true},
		{"manifold.events.r.*.run_finished", "manifold.events.r.>", true},
		{"manifold.events.r.r.run_finished", "manifold.events.r.>", true},
		{"manifold.events.>", "manifold.events.r.>", true},
		{">", "manifold.events.r.>", true},
		{"manifold.events.*.*.run_finished", "manifold.events.r.>", true},
		{"manifold.events.q.>", "manifold.events.r.>", false},
		{"manifold.events.rr.>", "manifold.events.r.>", false},
		{"manifold.events.r", "manifold.events.r.>", false}, // '>' needs a token
		{"manifold.events", "manifold.events.r.>", false},
		{"manifold.*", "manifold.events.r.>", false},
		{"manifold.outcomes.>", "manifold.events.r.>", false},
		{"a.b", "a.b", true},
		{"a.*", "a.b.c", false},
	} {
		if got := subjectsOverlap(c.a, c.b); got != c.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := subjectsOverlap(c.b, c.a); got != c.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
	if !readsSubjects(jetstream.ConsumerConfig{}, "manifold.events.r.>") {
		t.Error("a consumer without a filter reads every subject")
	}
	if readsSubjects(jetstream.ConsumerConfig{FilterSubjects: []string{"manifold.events.q.>", "manifold.events.s.>"}}, "manifold.events.r.>") {
		t.Error("filters of other trees")
	}
}
