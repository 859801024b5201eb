package service

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/resources"
)

// pollRunner answers the unit watcher's `systemctl show` with recorded
// outputs, one per poll, staying on the last; it tells polled each time.
type pollRunner struct {
	t      *testing.T
	mu     sync.Mutex
	outs   []string
	calls  [][]string
	polled chan int
}

func (r *pollRunner) Run(_ context.Context, c resources.Command) (resources.CommandResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c.Argv)
	i := min(len(r.calls), len(r.outs)) - 1
	select {
	case r.polled <- len(r.calls):
	default:
	}
	return resources.CommandResult{Stdout: []byte(r.outs[i])}, nil
}

// TestUnitInactiveTriggersRepair: nginx, running at the first poll, is
// found inactive at the second; the watcher hints service#nginx, the loop
// runs a drift repair of it alone, and the service (systemctl replayed)
// is started again.
func TestUnitInactiveTriggersRepair(t *testing.T) {
	t.Parallel()
	poll := &pollRunner{t: t, outs: []string{out(t, "show-watch-active.stdout"), out(t, "show-watch-inactive.stdout")}, polled: make(chan int, 16)}
	hints := make(chan converge.Hint, 16)
	uw := converge.NewUnitWatcher(converge.UnitWatcherConfig{Runner: poll, Interval: 5 * time.Millisecond}, hints)
	svc := newService(t, "running", nil)
	uw.Set("service#nginx", svc.WatchTargets())

	// The repair: the service's own check/apply, systemctl replayed.
	inactive := status(t, "show-loaded.stdout", "is-active-inactive.stdout", "is-enabled-enabled.stdout")
	repair := resources.NewReplayRunner(steps(
		inactive, inactive, // check, apply
		action(t, 0, "", "start", "nginx"),
		status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout"),
	)...)
	repaired := make(chan converge.Trigger, 1)
	runner := converge.RunnerFunc(func(ctx context.Context, tr converge.Trigger) (converge.RunResult, error) {
		o := resources.Execute(ctx, svc, &resources.Env{Runner: repair})
		if o.Err != nil {
			return converge.RunResult{}, o.Err
		}
		if !o.Changed {
			t.Errorf("repair outcome %+v: want changed", o)
		}
		repaired <- tr
		return converge.RunResult{Changed: tr.Keys}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan error, 1)
	go func() {
		loopDone <- converge.Loop(ctx, converge.LoopConfig{SkipStart: true, Interval: time.Hour}, runner, hints)
	}()
	uw.Start(ctx)
	defer func() { cancel(); uw.Stop(); <-loopDone }()

	select {
	case tr := <-repaired:
		if tr.Kind != converge.TriggerDrift || len(tr.Keys) != 1 || tr.Keys[0] != "service#nginx" {
			t.Fatalf("trigger %+v: want a drift repair of service#nginx", tr)
		}
		if why := tr.Why["service#nginx"]; !strings.Contains(why, "unit nginx active/running enabled → inactive/dead enabled") {
			t.Fatalf("why %q", why)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no repair within 10s of the unit going inactive")
	}
	if err := repair.Verify(); err != nil {
		t.Fatal(err) // systemctl start nginx was run
	}
	poll.mu.Lock()
	defer poll.mu.Unlock()
	want := []string{"systemctl", "show", "--property=LoadState,ActiveState,SubState,UnitFileState,NeedDaemonReload", "--", "nginx"}
	if got := poll.calls[0]; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("poll argv %q, want %q", got, want)
	}
}

// TestUnitWatcherChunks: MaxUnitsPerShow units are one systemctl call, one
// more is two; a unit that did not change hints nothing.
func TestUnitWatcherChunks(t *testing.T) {
	t.Parallel()
	active, err := os.ReadFile(filepath.Join("testdata", "show-watch-active.stdout"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{converge.MaxUnitsPerShow, converge.MaxUnitsPerShow + 1} {
		r := &argsRunner{block: string(active)}
		hints := make(chan converge.Hint, 1)
		uw := converge.NewUnitWatcher(converge.UnitWatcherConfig{Runner: r}, hints)
		for i := range n {
			name := "u" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + "-" + itoa(i)
			uw.Set("service#"+name, []resources.WatchTarget{{Unit: name}})
		}
		uw.Poll(context.Background())
		uw.Poll(context.Background())
		wantCalls := 2 * ((n + converge.MaxUnitsPerShow - 1) / converge.MaxUnitsPerShow)
		if r.calls != wantCalls || r.maxUnits > converge.MaxUnitsPerShow {
			t.Fatalf("%d units: %d calls of at most %d units, want %d of at most %d", n, r.calls, r.maxUnits, wantCalls, converge.MaxUnitsPerShow)
		}
		if len(hints) != 0 {
			t.Fatalf("%d units: a hint though nothing changed: %+v", n, <-hints)
		}
	}
}

// argsRunner answers `systemctl show` with block for every unit asked.
type argsRunner struct {
	block           string
	calls, maxUnits int
}

func (r *argsRunner) Run(_ context.Context, c resources.Command) (resources.CommandResult, error) {
	r.calls++
	units := len(c.Argv) - 4
	r.maxUnits = max(r.maxUnits, units)
	blocks := make([]string, units)
	for i := range blocks {
		blocks[i] = strings.TrimSuffix(r.block, "\n")
	}
	return resources.CommandResult{Stdout: []byte(strings.Join(blocks, "\n\n") + "\n")}, nil
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
