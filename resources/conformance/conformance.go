// Package conformance is the suite every resource type runs in its tests:
// noop never mutates the system, apply changes it, apply then check
// converges, and a second apply is stable.
//
//	func TestConformance(t *testing.T) {
//		dir := t.TempDir()
//		conformance.Run(t, conformance.Case{
//			New: func(t *testing.T) (resources.Resource, *resources.Env) { ... },
//			Snapshot: func(t *testing.T) string { ... },
//		})
//	}
package conformance

import (
	"context"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// Case is one resource, out of its desired state, for the suite to drive.
type Case struct {
	// New returns a fresh resource (same desired state every call) and the
	// Env to run it with. It is called once per step, as a worker builds a
	// resource per task; the suite sets Env.Noop itself on a copy.
	New func(t *testing.T) (resources.Resource, *resources.Env)
	// Snapshot describes the part of the system the resource manages (a
	// file's content, mode and owner; a package's version). The suite
	// compares snapshots to prove noop mutates nothing.
	Snapshot func(t *testing.T) string
}

// Run drives c through the steps below, failing t at the first broken
// promise. The system must start out of the desired state.
//
//  1. noop Execute reports "changed" (would change) and leaves Snapshot as it was;
//  2. Execute changes the system and reports "changed";
//  3. CheckApply(apply=false) on a fresh resource reports no change;
//  4. a second Execute is "stable";
//  5. a noop Execute is "stable" and mutates nothing.
func Run(t *testing.T, c Case) {
	t.Helper()
	ctx := context.Background()
	execute := func(step string, noop bool) resources.Outcome {
		t.Helper()
		res, env := c.New(t)
		if err := res.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v", step, err)
		}
		e := resources.Env{}
		if env != nil {
			e = *env
		}
		e.Noop = noop
		out := resources.Execute(ctx, res, &e)
		if out.Err != nil {
			t.Fatalf("%s: %v", step, out.Err)
		}
		return out
	}

	before := c.Snapshot(t)
	out := execute("noop on a drifting system", true)
	if out.Status != resources.StatusChanged || !out.Noop {
		t.Fatalf("noop on a drifting system: status %q (noop %v), want changed: the case must start out of its desired state", out.Status, out.Noop)
	}
	if after := c.Snapshot(t); after != before {
		t.Fatalf("noop mutated the system:\nbefore: %s\nafter:  %s", before, after)
	}

	out = execute("apply", false)
	if out.Status != resources.StatusChanged {
		t.Fatalf("apply: status %q, want changed (%s)", out.Status, out.Message)
	}
	applied := c.Snapshot(t)
	if applied == before {
		t.Fatalf("apply reported %q but the snapshot did not change: %s", out.Message, applied)
	}

	res, env := c.New(t)
	if env == nil {
		env = &resources.Env{}
	}
	check := *env
	check.Noop = true
	result, err := res.CheckApply(ctx, &check, false)
	if err != nil {
		t.Fatalf("check after apply: %v", err)
	}
	if result.Changed {
		t.Fatalf("check after apply still differs: %s\n%s", result.Message, result.Diff)
	}

	if out = execute("second apply", false); out.Status != resources.StatusStable {
		t.Fatalf("second apply: status %q, want stable (%s)", out.Status, out.Message)
	}
	if out = execute("noop on a converged system", true); out.Status != resources.StatusStable {
		t.Fatalf("noop on a converged system: status %q, want stable (%s)", out.Status, out.Message)
	}
	if after := c.Snapshot(t); after != applied {
		t.Fatalf("converged runs mutated the system:\nbefore: %s\nafter:  %s", applied, after)
	}
}
