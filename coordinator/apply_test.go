package coordinator

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
)

// TestDeriveChildNoop is the seeds' noop strengthening table, row by row
// (apply-resource-design.txt, ccm-manifest-provider.txt).
func TestDeriveChildNoop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		parent, resource, want bool
		action                 string
	}{
		{true, false, true, "No change, parent noop already active"},
		{true, true, true, "No change, parent noop already active"},
		{false, true, true, "Enable noop on manager"},
		{false, false, false, "No change"},
	}
	for _, tt := range tests {
		got := deriveChild(tt.parent, false, 0, applyProps{Noop: tt.resource})
		if got.Noop != tt.want {
			t.Errorf("parent noop %v, resource noop %v (%s): child noop %v, want %v", tt.parent, tt.resource, tt.action, got.Noop, tt.want)
		}
		if got.HealthCheckOnly {
			t.Errorf("parent noop %v, resource noop %v: noop leaked into health-check mode", tt.parent, tt.resource)
		}
	}
}

// TestDeriveChildHealthCheck: "Health check mode follows the same
// strengthening pattern. The effective health check mode is true if either
// the parent or the resource sets it."
func TestDeriveChildHealthCheck(t *testing.T) {
	t.Parallel()
	tests := []struct{ parent, resource, want bool }{
		{true, false, true},
		{true, true, true},
		{false, true, true},
		{false, false, false},
	}
	for _, tt := range tests {
		got := deriveChild(false, tt.parent, 0, applyProps{HealthCheckOnly: tt.resource})
		if got.HealthCheckOnly != tt.want {
			t.Errorf("parent %v, resource %v: child health_check_only %v, want %v", tt.parent, tt.resource, got.HealthCheckOnly, tt.want)
		}
		if got.Noop {
			t.Errorf("parent %v, resource %v: health-check mode leaked into noop", tt.parent, tt.resource)
		}
	}
	// Both modes at once, independently.
	if got := deriveChild(true, false, 0, applyProps{HealthCheckOnly: true}); !got.Noop || !got.HealthCheckOnly {
		t.Errorf("noop parent, health-check resource: got %+v, want both", got)
	}
}

// TestDeriveChildAllowApply is the seed's transitive-trust table: the
// child is denied applies only when allow_apply is false; whether the child
// contains apply resources decides (in denyApplies) if that is an error.
func TestDeriveChildAllowApply(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	tests := []struct {
		allowApply    *bool
		childApplies  []string
		wantDeny      bool
		wantErr       bool
		allowOrReject string
	}{
		{nil, []string{"apply#x.yaml (x.yaml:3:5)"}, false, false, "true (default), child has applies: allowed"},
		{nil, nil, false, false, "true (default), child has none: allowed"},
		{&yes, []string{"apply#x.yaml (x.yaml:3:5)"}, false, false, "explicit true, child has applies: allowed"},
		{&no, []string{"apply#x.yaml (x.yaml:3:5)", "apply#y.yaml (x.yaml:4:5)"}, true, true, "false, child has applies: error"},
		{&no, nil, true, false, "false, child has none: allowed"},
	}
	for _, tt := range tests {
		child := deriveChild(false, false, 0, applyProps{AllowApply: tt.allowApply})
		if child.DenyApply != tt.wantDeny {
			t.Errorf("%s: DenyApply %v, want %v", tt.allowOrReject, child.DenyApply, tt.wantDeny)
		}
		var err error
		if child.DenyApply {
			err = denyApplies(tt.childApplies)
		}
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error %v, want error %v", tt.allowOrReject, err, tt.wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrApplyDenied) {
				t.Errorf("%s: %v does not wrap ErrApplyDenied", tt.allowOrReject, err)
			}
			for _, ref := range tt.childApplies {
				if !strings.Contains(err.Error(), ref) {
					t.Errorf("%s: %q does not name %s", tt.allowOrReject, err, ref)
				}
			}
		}
	}
}

func TestDeriveChildDepth(t *testing.T) {
	t.Parallel()
	for _, parent := range []int{0, 1, 9, 10} {
		if got := deriveChild(false, false, parent, applyProps{}).Depth; got != parent+1 {
			t.Errorf("parent depth %d: child depth %d, want %d", parent, got, parent+1)
		}
	}
}

// TestDecodeApplyProps: CCM's property names, as the coordinator decodes
// them from a parsed manifest in either shape.
func TestDecodeApplyProps(t *testing.T) {
	t.Parallel()
	src := `
resources:
  - apply:
      - sub/m.yaml:
          noop: true
          health_check_only: true
          allow_apply: false
          data: {a: 1, nested: {b: two}}
  - {type: apply, name: flat.yaml, noop: false}
`
	m, err := schemas.ParseUnchecked("m.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PrepareWith(m, PrepareOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Manifest.Resources) != 2 {
		t.Fatalf("want 2 resources, got %d", len(plan.Manifest.Resources))
	}
	r := &run{plan: plan}
	ccm, err := r.applyProps(0)
	if err != nil {
		t.Fatal(err)
	}
	if !ccm.Noop || !ccm.HealthCheckOnly || ccm.AllowApply == nil || *ccm.AllowApply || ccm.Data["a"] == nil {
		t.Errorf("CCM shape: got %+v", ccm)
	}
	flat, err := r.applyProps(1)
	if err != nil {
		t.Fatal(err)
	}
	if flat.Noop || (flat.AllowApply != nil && !*flat.AllowApply) || len(flat.Data) != 0 {
		t.Errorf("flat shape: got %+v", flat)
	}
}

func TestChildRunID(t *testing.T) {
	t.Parallel()
	parent := "20261122T211243Z-9f3a1c5e7b"
	seen := map[string]string{}
	add := func(id, what string) {
		t.Helper()
		if err := bus.ValidToken(id); err != nil {
			t.Errorf("%s: %q is not a valid token: %v", what, id, err)
		}
		if prev, ok := seen[id]; ok {
			t.Errorf("%s and %s share the ID %q", prev, what, id)
		}
		seen[id] = what
	}
	for task := range 12 {
		for attempt := 1; attempt <= 3; attempt++ {
			add(childRunID(parent, task, attempt), "task "+itoa(task)+" attempt "+itoa(attempt))
		}
	}
	if got := childRunID(parent, 2, 1); got != parent+"-a2" {
		t.Errorf("first attempt: %q, want %q", got, parent+"-a2")
	}
	if got := childRunID(parent, 2, 3); got != parent+"-a2r3" {
		t.Errorf("third attempt: %q, want %q", got, parent+"-a2r3")
	}
	if childRunID(parent, 4, 2) != childRunID(parent, 4, 2) {
		t.Error("childRunID is not deterministic (resume could not find the child)")
	}

	// Deep nesting: IDs stay within the token limit, unique per level and
	// per task, and deterministic.
	clear(seen)
	id := parent
	for level := range 40 {
		a, b := childRunID(id, 0, 1), childRunID(id, 1, 1)
		if len(a) > bus.MaxTokenLength || len(b) > bus.MaxTokenLength {
			t.Fatalf("level %d: IDs of %d and %d bytes exceed %d", level, len(a), len(b), bus.MaxTokenLength)
		}
		add(a, "level "+itoa(level)+" task 0")
		add(b, "level "+itoa(level)+" task 1")
		if a != childRunID(id, 0, 1) {
			t.Fatalf("level %d: capped ID is not deterministic", level)
		}
		id = a
	}
	if len(id) != bus.MaxTokenLength {
		t.Errorf("a capped ID is %d bytes, want exactly %d", len(id), bus.MaxTokenLength)
	}
	// Two long parents that share the kept prefix still get two IDs.
	long := strings.Repeat("x", bus.MaxTokenLength-3)
	if childRunID(long+"-a1", 0, 1) == childRunID(long+"-a2", 0, 1) {
		t.Error("long parents sharing a prefix gave the same child ID")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestPrepareWithDataLayers: the child's own data, then the apply's data,
// then the run's overrides, which always win; maps merge key by key.
func TestPrepareWithDataLayers(t *testing.T) {
	t.Parallel()
	src := `
data:
  own: child
  both: child
  all: child
  nested: {keep: child, over: child}
resources:
  - file:
      - "/tmp/{{ data.all }}": {content: x}
`
	m, err := schemas.ParseUnchecked("child.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	applyData := map[string]any{"both": "apply", "all": "apply", "apply": "apply", "nested": map[string]any{"over": "apply"}}
	overrides := map[string]any{"all": "cli", "nested": map[string]any{"cli": "cli"}}
	plan, err := PrepareWith(m, PrepareOpts{ApplyData: applyData, Overrides: overrides})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"own": "child", "both": "apply", "all": "cli", "apply": "apply",
		"nested": map[string]any{"keep": "child", "over": "apply", "cli": "cli"},
	}
	for k, v := range want {
		if got := plan.Data[k]; !equalAny(got, v) {
			t.Errorf("data.%s = %v, want %v", k, got, v)
		}
	}
	if len(plan.Data) != len(want) {
		t.Errorf("data = %v, want %v", plan.Data, want)
	}
	if got := plan.Manifest.Resources[0].Name; got != "/tmp/cli" {
		t.Errorf("name rendered from data: %q, want /tmp/cli", got)
	}
	// The inputs are not modified (nothing leaks back to the parent).
	if applyData["nested"].(map[string]any)["keep"] != nil || overrides["nested"].(map[string]any)["over"] != nil {
		t.Error("PrepareWith modified the apply's data or the overrides")
	}
}

func equalAny(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok != bok {
		return false
	}
	if !aok {
		return a == b
	}
	if len(am) != len(bm) {
		return false
	}
	for k := range am {
		if !equalAny(am[k], bm[k]) {
			return false
		}
	}
	return true
}
