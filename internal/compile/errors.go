package compile

import "errors"

// ErrFactInName is wrapped by the error of a name, alias or reference that
// looks up a fact in a run not compiled per host (a run whose resources
// any worker of a pool may take), and of an apply resource's name that
// needs facts in a per-host run (its child manifest is bundled before).
var ErrFactInName = errors.New("compile: names, aliases and references are rendered from data, before the run: facts are not available there (a fan-out, run --each-worker or --where, and an assignment render them with each host's facts)")

// ErrNoManifestDir is wrapped by the error of a resources_jet_file when
// the manifest has no directory to read it from (an inline manifest).
var ErrNoManifestDir = errors.New("compile: no manifest directory")

// ErrInternal is wrapped by the error of a compilation that panicked: a
// bug, not an invalid manifest. The error holds the panic and its stack.
var ErrInternal = errors.New("compile: internal error")
