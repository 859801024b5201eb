package schemas

import "time"

// CUEProbe, when set, is called before a manifest written in CUE (.cue) is
// evaluated in this process. CUE evaluation cannot be interrupted, and a
// few hundred bytes of comprehensions can ask for millions of resources:
// the probe evaluates the manifest where it can be killed (another
// process, with a time and memory bound) and returns an error when that
// evaluation did not end well, so a manifest that would hold this process
// is refused. Manifests in YAML or JSON need no probe.
var CUEProbe func(filename string, src []byte) error

// DefaultCUETimeout bounds the evaluation of a manifest written in CUE
// (see CUEProbe).
const DefaultCUETimeout = 10 * time.Second
