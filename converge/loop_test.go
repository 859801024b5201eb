package converge

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeRunner records the triggers it is given and answers with a function
// of them; each call is announced on calls.
type fakeRunner struct {
	mu     sync.Mutex
	got    []Trigger
	answer func(Trigger) RunResult
	calls  chan Trigger
}

func newFakeRunner(answer func(Trigger) RunResult) *fakeRunner {
	return &fakeRunner{answer: answer, calls: make(chan Trigger, 1000)}
}

func (f *fakeRunner) Converge(ctx context.Context, t Trigger) (RunResult, error) {
	if ctx.Err() != nil {
		panic("a convergence run was given a cancelled context")
	}
	f.mu.Lock()
	f.got = append(f.got, t)
	f.mu.Unlock()
	f.calls <- t
	return f.answer(t), nil
}

func (f *fakeRunner) next(t *testing.T) Trigger {
	t.Helper()
	select {
	case tr := <-f.calls:
		return tr
	case <-time.After(5 * time.Second):
		t.Fatal("no convergence run within 5s")
		return Trigger{}
	}
}

func startLoop(t *testing.T, cfg LoopConfig, r Runner) (chan Hint, <-chan Status, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hints := make(chan Hint)
	statuses := make(chan Status, 1000)
	cfg.OnStatus = func(s Status) { statuses <- s }
	done := make(chan error, 1)
	go func() { done <- Loop(ctx, cfg, r, hints) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Loop: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Loop did not return within 5s of its context's end")
		}
	}
	t.Cleanup(stop)
	return hints, statuses, stop
}

func TestLoopStartsThenRepairsWhatWasHinted(t *testing.T) {
	r := newFakeRunner(func(tr Trigger) RunResult { return RunResult{Changed: tr.Keys} })
	hints, _, _ := startLoop(t, LoopConfig{Coalesce: CoalesceConfig{Quiet: time.Millisecond, MaxDelay: 5 * time.Millisecond}}, r)
	if tr := r.next(t); tr.Kind != TriggerStart || len(tr.Keys) != 0 {
		t.Fatalf("first run %+v, want a full start run", tr)
	}
	hints <- Hint{Key: "file#/etc/motd", Why: "write /etc/motd"}
	tr := r.next(t)
	if tr.Kind != TriggerDrift || !slices.Equal(tr.Keys, []string{"file#/etc/motd"}) || tr.Why["file#/etc/motd"] != "write /etc/motd" {
		t.Fatalf("repair run %+v", tr)
	}
	hints <- Hint{All: true, Why: "event queue overflow"}
	if tr := r.next(t); tr.Kind != TriggerDrift || len(tr.Keys) != 0 || tr.Why[""] != "event queue overflow" {
		t.Fatalf("after an overflow %+v, want a full run", tr)
	}
}

func TestLoopBacksOffAFightAndSaysFlapping(t *testing.T) {
	r := newFakeRunner(func(tr Trigger) RunResult { return RunResult{Changed: tr.Keys} })
	hints, statuses, _ := startLoop(t, LoopConfig{SkipStart: true,
		Coalesce: CoalesceConfig{Quiet: time.Millisecond, MaxDelay: time.Millisecond},
		Damper:   DamperConfig{Window: time.Minute, Threshold: 2, Base: 200 * time.Millisecond, Max: time.Second}}, r)
	// Another writer rewrites the file as soon as it is repaired: each
	// repair is followed by a hint.
	var repairs []time.Time
	for len(repairs) < 5 {
		hints <- Hint{Key: "f", Why: "write f"}
		tr := r.next(t)
		if tr.Kind != TriggerDrift {
			t.Fatalf("run %+v", tr)
		}
		repairs = append(repairs, time.Now())
	}
	// Three repairs at once (the third is past the threshold of two),
	// then 200 ms and 400 ms apart, where an unbacked-off fight spins.
	if gap := repairs[3].Sub(repairs[2]); gap < 200*time.Millisecond {
		t.Fatalf("4th repair %v after the 3rd, want >= 200ms", gap)
	}
	if gap := repairs[4].Sub(repairs[3]); gap < 400*time.Millisecond {
		t.Fatalf("5th repair %v after the 4th, want >= 400ms", gap)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case s := <-statuses:
			if s.State == StateFlapping && slices.Equal(s.Flapping, []string{"f"}) {
				return
			}
		case <-deadline:
			t.Fatal("never reported flapping")
		}
	}
}

func TestLoopRemediatesCriticalHealth(t *testing.T) {
	r := newFakeRunner(func(tr Trigger) RunResult { return RunResult{Critical: tr.HealthOnly} })
	_, _, _ = startLoop(t, LoopConfig{SkipStart: true, HealthInterval: 10 * time.Millisecond}, r)
	if tr := r.next(t); tr.Kind != TriggerHealth || !tr.HealthOnly {
		t.Fatalf("run %+v, want health checks", tr)
	}
	if tr := r.next(t); tr.Kind != TriggerHealth || tr.HealthOnly || len(tr.Keys) != 0 {
		t.Fatalf("run %+v, want a full remediation run", tr)
	}
}

func TestLoopNoopReportsDrifted(t *testing.T) {
	r := newFakeRunner(func(tr Trigger) RunResult { return RunResult{Changed: []string{"f"}} })
	_, statuses, _ := startLoop(t, LoopConfig{Noop: true}, r)
	r.next(t)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case s := <-statuses:
			if s.State == StateDrifted {
				return
			}
		case <-deadline:
			t.Fatal("noop loop never reported drifted")
		}
	}
}

func TestLoopFinishesTheRunInProgressOnStop(t *testing.T) {
	release := make(chan struct{})
	finished := make(chan struct{})
	r := RunnerFunc(func(ctx context.Context, tr Trigger) (RunResult, error) {
		<-release
		if ctx.Err() != nil {
			t.Error("the run's context was cancelled by the stop")
		}
		close(finished)
		return RunResult{}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Loop(ctx, LoopConfig{}, r, make(chan Hint)) }()
	cancel()
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Loop did not return")
	}
	select {
	case <-finished:
	default:
		t.Fatal("Loop returned before its run finished")
	}
}
