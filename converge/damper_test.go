package converge

import (
	"testing"
	"time"
)

func TestDamperBacksOffAFightAndForgetsItWhenCalm(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	d := NewDamper(DamperConfig{Window: 10 * time.Second, Threshold: 3, Base: time.Second, Max: 4 * time.Second})
	type step struct {
		at       float64
		repair   bool // record a repair after asking
		ok       bool
		next     float64
		flapping bool
	}
	steps := []step{
		{at: 0, repair: true, ok: true, next: 0},
		{at: 1, repair: true, ok: true, next: 1},
		{at: 2, repair: true, ok: true, next: 2},
		// The 4th repair within 10 s: 1 s of back-off from now on.
		{at: 3, repair: true, ok: true, next: 3},
		{at: 3.5, ok: false, next: 4, flapping: true},
		{at: 4, repair: true, ok: true, next: 4, flapping: true}, // 2 s
		{at: 5, ok: false, next: 6, flapping: true},
		{at: 6, repair: true, ok: true, next: 6, flapping: true},   // 4 s
		{at: 10, repair: true, ok: true, next: 10, flapping: true}, // capped at 4 s
		{at: 13, ok: false, next: 14, flapping: true},
		// Ten quiet seconds after the last repair: calm again.
		{at: 20.5, ok: true, next: 20.5},
	}
	for i, s := range steps {
		ok, next, flapping := d.Allow("file#f", at(s.at))
		if ok != s.ok || !next.Equal(at(s.next)) || flapping != s.flapping {
			t.Fatalf("step %d at %gs: Allow = %v, %v, %v; want %v, %gs, %v", i, s.at, ok, next.Sub(t0).Seconds(), flapping, s.ok, s.next, s.flapping)
		}
		if s.repair {
			d.Repaired("file#f", at(s.at))
		}
	}
	if f := d.Flapping(at(20.5)); len(f) != 0 {
		t.Fatalf("still flapping: %v", f)
	}
	// Other resources were never held back.
	if ok, _, fl := d.Allow("file#g", at(3.5)); !ok || fl {
		t.Fatal("an untouched resource was damped")
	}
}
