package coordinator

import (
	"path"
	"sync/atomic"

	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/schemas"
)

// Plan is a manifest ready to run (see compile.Plan): the coordinator
// runs what the one compile path builds.
type Plan = compile.Plan

// Prepare compiles a parsed root manifest with the run's data overrides,
// which always win (compile.Compile). The manifest is modified in place.
func Prepare(m *schemas.Manifest, overrides map[string]any) (*Plan, error) {
	return PrepareWith(m, PrepareOpts{Overrides: overrides})
}

// PrepareOpts are the inputs of PrepareWith beyond the manifest.
type PrepareOpts struct {
	// ApplyData is the data property of the apply resource that started
	// this (child) manifest: merged over the manifest's own data.
	ApplyData map[string]any
	// Overrides are the run's external data overrides: merged last, they
	// always win.
	Overrides map[string]any
	// Facts are the facts the hierarchy is resolved over (the run
	// request's); nil is none.
	Facts map[string]any
	// Source is the manifest's text, for its data annotations.
	Source []byte
	// External accepts references to resources outside the manifest (its
	// ancestors' resources in the same session). Nil accepts none.
	External func(ref string) bool
	// PerHost compiles centrally a run whose hosts compile it again with
	// their own facts (a fan-out): see compile.Opts.PerHost.
	PerHost bool
	// HostFacts says Facts are those of the one worker the run is pinned
	// to: see compile.Opts.HostFacts.
	HostFacts bool
	// Files reads the files of the manifest's directory from the run's
	// bundle (a resources_jet_file, the files its templates read); nil
	// for an inline manifest.
	Files func(name string) ([]byte, error)
}

// PrepareWith is Prepare for child manifests: data in layers (manifest
// and hierarchy, apply resource, run overrides) and references to
// ancestors.
func PrepareWith(m *schemas.Manifest, o PrepareOpts) (*Plan, error) {
	if h := prepareHook.Load(); h != nil {
		(*h)(m.Path)
	}
	return compile.Compile(m, compile.Opts{ApplyData: o.ApplyData, Run: o.Overrides, Facts: o.Facts, Source: o.Source, External: o.External, Files: o.Files,
		PerHost: o.PerHost, HostFacts: o.HostFacts})
}

// prepareHook, when set (tests), is told the manifest path of each
// PrepareWith.
var prepareHook atomic.Pointer[func(path string)]

// MergeData returns a deep copy of base with over merged into it: maps
// merge key by key, any other value in over replaces base's
// (compile.MergeData).
func MergeData(base, over map[string]any) map[string]any {
	return compile.MergeData(base, over)
}

// bundleFiles reads the files of the directory of the bundle's manifest
// entry, for the templates of that manifest.
func bundleFiles(b *bundle.Bundle, entry string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) { return b.Read(path.Join(path.Dir(entry), name)) }
}
