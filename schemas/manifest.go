package schemas

import (
	"fmt"
	"time"
)

// Ordering says how resources without explicit edges are ordered.
type Ordering string

const (
	// OrderingManifest runs resources in declaration order, as CCM does.
	OrderingManifest Ordering = "manifest"
	// OrderingGraph runs resources only after their explicit require and
	// subscribe targets; independent resources run in parallel.
	OrderingGraph Ordering = "graph"
)

// Position is a place in a manifest file. Line and Column are 1-based; zero
// means unknown.
type Position struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

// String renders the position as file:line:col, leaving out unknown parts.
func (p Position) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
	}
}

// Manifest is a loaded, validated and normalised manifest. Whatever shape it
// was written in (CCM block shape or flat, YAML, JSON or CUE), it ends up
// here.
type Manifest struct {
	// Path is the file the manifest was loaded from, as given.
	Path string `json:"path"`
	// Data holds the manifest's `data:` defaults.
	Data map[string]any `json:"data,omitempty"`
	// Ordering defaults to OrderingManifest.
	Ordering Ordering `json:"ordering"`
	// FailOnError stops dispatching after the first failed resource.
	FailOnError bool `json:"fail_on_error"`
	// Resources in declaration order, with `defaults` entries merged in.
	Resources []Resource `json:"resources"`
	// Hierarchy is the `hierarchy:` section: the order in which
	// Overrides sections apply over Data for a host (see internal/hiera).
	Hierarchy Hierarchy `json:"hierarchy,omitzero"`
	// Overrides are the `overrides:` sections, keyed by rendered hierarchy
	// entries ("os:debian"), each merged over Data when its entry matches.
	Overrides map[string]map[string]any `json:"overrides,omitempty"`
	// ResourcesJetFile is CCM's `resources_jet_file`: a Jet template,
	// relative to the manifest's directory, that renders the resources
	// list over the resolved data and the facts. Resources is empty until
	// the manifest is compiled (internal/compile expands it).
	ResourcesJetFile string `json:"resources_jet_file,omitempty"`
	// PreMessage is printed before the run; a template over data and
	// facts.
	PreMessage string `json:"pre_message,omitempty"`
	// PostMessage is printed after the run when no resource failed; a
	// template over data and facts.
	PostMessage string `json:"post_message,omitempty"`
	// Defaults are the manifest-level `defaults:` per resource type,
	// already merged into Resources (kept for resources a jet file
	// generates).
	Defaults map[string]map[string]any `json:"defaults,omitempty"`
}

// Merge is how matching overrides combine with the data.
type Merge string

const (
	// MergeFirst applies only the first matching override, replacing the
	// data's top-level keys it sets. It is the default, as in CCM.
	MergeFirst Merge = "first"
	// MergeDeep applies every matching override in order, merging maps
	// recursively and concatenating lists.
	MergeDeep Merge = "deep"
)

// Hierarchy is a manifest's data hierarchy.
type Hierarchy struct {
	// Order lists entries such as "os:{{ lookup('facts.host.info.os') }}",
	// templates rendered over a host's facts. Empty means ["default"].
	Order []string `json:"order,omitempty"`
	// Merge defaults to MergeFirst.
	Merge Merge `json:"merge,omitempty"`
}

// Control is CCM's control property: guard expressions evaluated before a
// resource runs.
type Control struct {
	// If runs the resource only when the expression is true.
	If string `json:"if,omitempty"`
	// Unless skips the resource when the expression is true.
	Unless string `json:"unless,omitempty"`
}

// Resource is one resource of a manifest, normalised to the flat shape.
// Common properties have fields; the type-specific ones stay in Properties
// (already checked against the type's closed CUE schema), still holding any
// template expressions, for the worker to render and decode.
type Resource struct {
	// Type is the resource type, such as "file"; see Types.
	Type string `json:"type"`
	// Name identifies the resource within its type.
	Name string `json:"name"`
	// Alias is another name references may use (type#alias).
	Alias string `json:"alias,omitempty"`
	// Ensure is the desired state; file defaults to "present".
	Ensure string `json:"ensure,omitempty"`
	// Provider picks the implementation.
	Provider string `json:"provider,omitempty"`
	// Require lists references that must succeed first.
	Require []string `json:"require,omitempty"`
	// Subscribe lists references whose change triggers this resource.
	Subscribe []string `json:"subscribe,omitempty"`
	// Control holds CCM's guard expressions; nil when not set.
	Control *Control `json:"control,omitempty"`
	// HealthChecks are kept raw until the resource library interprets them.
	HealthChecks []map[string]any `json:"health_checks,omitempty"`
	// RegisterWhenStable are the service entries published when the
	// resource is applied, not failed, not noop and healthy (CCM's
	// registration), kept raw (templates) until the worker renders them.
	RegisterWhenStable []map[string]any `json:"register_when_stable,omitempty"`
	// Target is the worker pool; empty means the run's pool.
	Target string `json:"target,omitempty"`
	// Timeout bounds one execution; zero means the engine default.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Retry is how many more attempts a failed execution gets.
	Retry int `json:"retry,omitempty"`
	// AutoEdge false turns automatic edges off for this resource, to and
	// from it; nil is true.
	AutoEdge *bool `json:"autoedge,omitempty"`
	// AutoRequire lists the references this resource requires implicitly
	// (automatic edges), set when the manifest is compiled.
	AutoRequire []string `json:"auto_require,omitempty"`
	// AutoSkipped lists the automatic edges not added because they would
	// close a cycle, with the reason, set when the manifest is compiled.
	AutoSkipped []string `json:"auto_skipped,omitempty"`
	// Properties are the type-specific properties (not the common ones above).
	Properties map[string]any `json:"properties,omitempty"`
	// Pos is where the resource is declared.
	Pos Position `json:"pos"`
	// Path is the resource's place in the document, such as
	// "resources[1].file[0]./tmp/x", for error messages.
	Path string `json:"path,omitempty"`
}

// Ref returns the resource's reference, "type#name".
func (r Resource) Ref() string { return r.Type + "#" + r.Name }
