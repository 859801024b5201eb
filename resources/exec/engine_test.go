package exec

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// These tests drive exec through the engine, the way a worker does.

func TestEngineNoopNeverRuns(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	e := newExec(t, resources.Spec{Name: "touch " + marker})

	for _, env := range []*resources.Env{{Noop: true}, {Noop: true, Refresh: true}} {
		out := resources.Execute(t.Context(), e, env)
		if out.Status != resources.StatusChanged || !out.Noop {
			t.Errorf("noop outcome = %+v", out)
		}
		if exists(t, marker) {
			t.Fatal("noop ran the command")
		}
	}
	out := resources.Execute(t.Context(), e, &resources.Env{})
	if out.Status != resources.StatusChanged || !exists(t, marker) {
		t.Errorf("apply outcome = %+v, marker exists %v", out, exists(t, marker))
	}
}

func TestEngineCreatesConverges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newExec(t, resources.Spec{Name: "touch out", Properties: map[string]any{"creates": "out"}})
	env := &resources.Env{WorkDir: dir}
	if out := resources.Execute(t.Context(), e, env); out.Status != resources.StatusChanged {
		t.Fatalf("first = %+v", out)
	}
	if out := resources.Execute(t.Context(), e, env); out.Status != resources.StatusStable {
		t.Errorf("second = %+v", out)
	}

	// A command that does not create what it promises does not converge.
	broken := newExec(t, resources.Spec{Name: "true", Properties: map[string]any{"creates": "never"}})
	if out := resources.Execute(t.Context(), broken, env); !errors.Is(out.Err, resources.ErrNotConverged) {
		t.Errorf("broken = %+v", out)
	}
}

func TestEngineRefreshOnly(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	e := newExec(t, resources.Spec{Name: "touch " + marker, Properties: map[string]any{"refreshonly": true}})
	if out := resources.Execute(t.Context(), e, &resources.Env{}); out.Status != resources.StatusStable || exists(t, marker) {
		t.Fatalf("without refresh = %+v", out)
	}
	out := resources.Execute(t.Context(), e, &resources.Env{Refresh: true})
	if out.Status != resources.StatusChanged || !out.Refreshed || !exists(t, marker) {
		t.Errorf("with refresh = %+v, marker exists %v", out, exists(t, marker))
	}
}

func TestEngineFailure(t *testing.T) {
	t.Parallel()
	e := newExec(t, resources.Spec{Name: "/bin/sh -c 'echo boom >&2; exit 4'"})
	out := resources.Execute(t.Context(), e, &resources.Env{})
	var exitErr *ExitError
	if out.Status != resources.StatusFailed || !errors.As(out.Err, &exitErr) || exitErr.Stderr != "boom\n" {
		t.Errorf("outcome = %+v", out)
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := resources.NewRegistry()
	reg.Register(Type, New)
	if _, err := reg.New(resources.Spec{Type: Type, Name: `echo "x`}); err == nil {
		t.Error("registry accepted an unbalanced quote")
	}
	if _, err := reg.New(resources.Spec{Type: Type, Name: "true"}); err != nil {
		t.Errorf("registry: %v", err)
	}
}
