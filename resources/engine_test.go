package resources

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fake is a hand-written Resource: it drifts until applied (or, with
// neverConverges, forever) and counts its calls.
type fake struct {
	converged      bool
	neverConverges bool
	checkErr       error
	applyErr       error
	refreshable    bool
	noRecheck      bool
	panics         bool
	onApply        func()

	checks, applies int
	sawRefresh      []bool
}

func (f *fake) Validate() error { return nil }

func (f *fake) CheckApply(ctx context.Context, env *Env, apply bool) (Result, error) {
	if f.panics {
		panic("boom")
	}
	f.sawRefresh = append(f.sawRefresh, env.Refresh)
	if !apply {
		f.checks++
		if f.checkErr != nil {
			return Result{}, f.checkErr
		}
		if f.converged {
			return Result{Message: "in sync"}, nil
		}
		return Result{Changed: true, Message: "update content", Diff: "-a\n+b"}, nil
	}
	f.applies++
	if f.onApply != nil {
		f.onApply()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if f.applyErr != nil {
		return Result{}, f.applyErr
	}
	if f.converged && !env.Refresh {
		return Result{Message: "in sync"}, nil
	}
	if !f.neverConverges {
		f.converged = true
	}
	if env.Refresh && f.refreshable {
		return Result{Changed: true, Message: "refreshed"}, nil
	}
	return Result{Changed: true, Message: "updated"}, nil
}

func (f *fake) Refreshable() bool { return f.refreshable }

// norecheck adds Rechecker to fake.
type norecheck struct{ *fake }

func (n norecheck) Recheck() bool { return false }

func TestExecute(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	tests := []struct {
		name        string
		res         func() (*fake, Resource)
		env         Env
		status      Status
		checks      int
		applies     int
		refreshed   bool
		noop        bool
		message     string
		errIs       error
		diffNonZero bool
	}{
		{
			name:   "stable",
			res:    func() (*fake, Resource) { f := &fake{converged: true}; return f, f },
			status: StatusStable, checks: 1, message: "in sync",
		},
		{
			name:   "changed then re-checked",
			res:    func() (*fake, Resource) { f := &fake{}; return f, f },
			status: StatusChanged, checks: 2, applies: 1, message: "updated", diffNonZero: true,
		},
		{
			name:   "noop stops after check",
			res:    func() (*fake, Resource) { f := &fake{}; return f, f },
			env:    Env{Noop: true},
			status: StatusChanged, checks: 1, noop: true, message: "would update content", diffNonZero: true,
		},
		{
			name:   "not converged",
			res:    func() (*fake, Resource) { f := &fake{neverConverges: true}; return f, f },
			status: StatusFailed, checks: 2, applies: 1, errIs: ErrNotConverged, message: "re-check: resource did not converge after apply: update content", diffNonZero: true,
		},
		{
			name:   "rechecker opts out",
			res:    func() (*fake, Resource) { f := &fake{neverConverges: true}; return f, norecheck{f} },
			status: StatusChanged, checks: 1, applies: 1, message: "updated", diffNonZero: true,
		},
		{
			name:   "check error",
			res:    func() (*fake, Resource) { f := &fake{checkErr: errBoom}; return f, f },
			status: StatusFailed, checks: 1, errIs: errBoom, message: "check: boom",
		},
		{
			name:   "apply error",
			res:    func() (*fake, Resource) { f := &fake{applyErr: errBoom}; return f, f },
			status: StatusFailed, checks: 1, applies: 1, errIs: errBoom, message: "apply: boom", diffNonZero: true,
		},
		{
			name:   "refresh acts on a refreshable resource",
			res:    func() (*fake, Resource) { f := &fake{converged: true, refreshable: true}; return f, f },
			env:    Env{Refresh: true},
			status: StatusChanged, checks: 2, applies: 1, refreshed: true, message: "refreshed",
		},
		{
			name:   "refresh in noop",
			res:    func() (*fake, Resource) { f := &fake{converged: true, refreshable: true}; return f, f },
			env:    Env{Refresh: true, Noop: true},
			status: StatusChanged, checks: 1, refreshed: true, noop: true, message: "would refresh",
		},
		{
			name:   "refresh and drift in noop",
			res:    func() (*fake, Resource) { f := &fake{refreshable: true}; return f, f },
			env:    Env{Refresh: true, Noop: true},
			status: StatusChanged, checks: 1, refreshed: true, noop: true, message: "would update content and refresh", diffNonZero: true,
		},
		{
			name:   "refresh ignored when not refreshable",
			res:    func() (*fake, Resource) { f := &fake{converged: true}; return f, f },
			env:    Env{Refresh: true},
			status: StatusStable, checks: 1, message: "in sync",
		},
		{
			name:   "panic becomes failure",
			res:    func() (*fake, Resource) { f := &fake{panics: true}; return f, f },
			status: StatusFailed, message: "execute: panic: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, res := tt.res()
			env := tt.env
			out := Execute(context.Background(), res, &env)
			if out.Status != tt.status {
				t.Fatalf("status %q, want %q (outcome %+v)", out.Status, tt.status, out)
			}
			if out.Changed != (tt.status == StatusChanged) {
				t.Errorf("Changed %v with status %q", out.Changed, out.Status)
			}
			if f.checks != tt.checks || f.applies != tt.applies {
				t.Errorf("checks=%d applies=%d, want %d and %d", f.checks, f.applies, tt.checks, tt.applies)
			}
			if out.Refreshed != tt.refreshed || out.Noop != tt.noop {
				t.Errorf("refreshed=%v noop=%v, want %v and %v", out.Refreshed, out.Noop, tt.refreshed, tt.noop)
			}
			if out.Message != tt.message {
				t.Errorf("message %q, want %q", out.Message, tt.message)
			}
			if tt.errIs != nil && !errors.Is(out.Err, tt.errIs) {
				t.Errorf("err %v, want %v", out.Err, tt.errIs)
			}
			if (tt.status == StatusFailed) != (out.Err != nil) {
				t.Errorf("err %v with status %q", out.Err, out.Status)
			}
			if (out.Diff != "") != tt.diffNonZero {
				t.Errorf("diff %q", out.Diff)
			}
			if !reflect.DeepEqual(env, tt.env) {
				t.Errorf("Execute modified env: %+v", env)
			}
		})
	}
}

func TestExecuteRecheckWithoutRefresh(t *testing.T) {
	t.Parallel()
	f := &fake{converged: true, refreshable: true}
	out := Execute(context.Background(), f, &Env{Refresh: true})
	if out.Status != StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	if want := []bool{true, true, false}; len(f.sawRefresh) != 3 || f.sawRefresh[2] {
		t.Fatalf("refresh seen by check, apply, re-check = %v, want %v", f.sawRefresh, want)
	}
}

func TestExecuteCancelled(t *testing.T) {
	t.Parallel()
	errShutdown := errors.New("worker shutting down")

	t.Run("before check", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errShutdown)
		f := &fake{}
		out := Execute(ctx, f, &Env{})
		if out.Status != StatusFailed || !errors.Is(out.Err, errShutdown) {
			t.Fatalf("outcome %+v", out)
		}
		if f.checks != 0 {
			t.Fatalf("checked %d times after cancellation", f.checks)
		}
	})

	t.Run("during apply", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancelCause(context.Background())
		f := &fake{onApply: func() { cancel(errShutdown) }}
		out := Execute(ctx, f, &Env{})
		if out.Status != StatusFailed || !errors.Is(out.Err, errShutdown) || !errors.Is(out.Err, context.Canceled) {
			t.Fatalf("outcome %+v", out)
		}
		if !strings.HasPrefix(out.Message, "apply: ") {
			t.Fatalf("message %q", out.Message)
		}
	})
}

func TestExecuteNilEnv(t *testing.T) {
	t.Parallel()
	if out := Execute(context.Background(), &fake{}, nil); out.Status != StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
}
