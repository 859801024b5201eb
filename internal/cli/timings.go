package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// TimingsEnv names the environment variable that makes a command write
// the wall-clock times of its phases, as JSON, to the file it names when
// the command ends (docs/performance.md, "Where a one-shot apply's time
// goes"). The output of the command is unchanged.
const TimingsEnv = "MANIFOLD_TIMINGS"

// Phases a command marks (docs/performance.md lists them in order). Those
// of the embedded engine are marked by its own goroutine, side by side
// with facts and the compile.
const (
	PhaseMain              = "main"               // the process's main entered (IO.MainEntered)
	PhaseCommand           = "command"            // flags parsed, the command begins
	PhaseEngineStore       = "engine_store"       // stale stores removed, the store directory made
	PhaseEngineServer      = "engine_server"      // NATS server with JetStream accepting connections
	PhaseEngineConnected   = "engine_connected"   // in-process connection open
	PhaseEngineStreams     = "engine_streams"     // streams, buckets, object stores provisioned
	PhaseEngineCoordinator = "engine_coordinator" // coordinator started
	PhaseFacts             = "facts"              // data and facts gathered
	PhaseEngineWorker      = "engine_worker"      // worker started: the engine is up
	PhaseCompiled          = "compiled"           // manifest compiled
	PhaseBundlePacked      = "bundle_packed"      // bundle packed
	PhaseTelemetry         = "telemetry"          // tracing set up
	PhaseEngineReady       = "engine_ready"       // the command has the started engine
	PhaseBundleStored      = "bundle_stored"      // bundle stored on the bus (embedded: kept in the bus's memory, bus.KeepBundle, while the coordinator and worker start)
	PhaseRunSubmitted      = "run_submitted"      // run request published
	PhaseRunFinished       = "run_finished"       // the run's run_finished event read (embedded, --output json: its report handed over)
	PhaseReportRead        = "report_read"        // the run's report read from the bus
	PhaseReportWritten     = "report_written"     // report or summary printed
	PhaseEngineStopped     = "engine_stopped"     // embedded engine stopped
	PhaseExit              = "exit"               // the command returned; the file is written next
)

// maxTimedPhases bounds the phases one command records: a command marks
// about twenty; past this bound marks are dropped (and counted), the exit
// phase excepted.
const maxTimedPhases = 256

// timings records when the phases of one command happened. A nil
// *timings records nothing, so marking costs a context look-up when
// TimingsEnv is not set.
type timings struct {
	mu      sync.Mutex
	path    string
	phases  []TimedPhase
	dropped int
}

// TimedPhase is one phase of a timings file.
type TimedPhase struct {
	// Phase is the phase's name (Phase* constants).
	Phase string `json:"phase"`
	// UnixNano is when it happened, wall clock, in nanoseconds since the
	// Unix epoch: comparable with another process's clock on this host.
	UnixNano int64 `json:"unix_nano"`
	// MS is the time since the first phase, in milliseconds.
	MS float64 `json:"ms"`
}

// TimingsFile is the document written to TimingsEnv's file.
type TimingsFile struct {
	// Command is the command's name (apply, validate...).
	Command string `json:"command"`
	// PID is the process's ID.
	PID int `json:"pid"`
	// Phases are in the order they happened (ties in marking order).
	Phases []TimedPhase `json:"phases"`
	// Dropped counts marks past the bound of 256 phases (PhaseExit is
	// always recorded).
	Dropped int `json:"dropped,omitempty"`
}

type timingsKey struct{}

// withTimings returns ctx carrying a recorder writing to path, and the
// recorder. mainEntered, when known, is the first phase (PhaseMain).
func withTimings(ctx context.Context, path string, mainEntered time.Time) (context.Context, *timings) {
	t := &timings{path: path}
	if !mainEntered.IsZero() {
		t.markAt(PhaseMain, mainEntered)
	}
	return context.WithValue(ctx, timingsKey{}, t), t
}

// timingsOf returns ctx's recorder, nil when it has none.
func timingsOf(ctx context.Context) *timings {
	t, _ := ctx.Value(timingsKey{}).(*timings)
	return t
}

// mark records that phase happened now, when ctx carries a recorder.
func mark(ctx context.Context, phase string) {
	if t := timingsOf(ctx); t != nil {
		t.markAt(phase, time.Now())
	}
}

func (t *timings) markAt(phase string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.phases) >= maxTimedPhases {
		t.dropped++
		return
	}
	t.phases = append(t.phases, TimedPhase{Phase: phase, UnixNano: at.UnixNano()})
}

// file returns the document, phases sorted by time.
func (t *timings) file(command string) TimingsFile {
	t.mu.Lock()
	defer t.mu.Unlock()
	phases := slices.Clone(t.phases)
	slices.SortStableFunc(phases, func(a, b TimedPhase) int { return cmp.Compare(a.UnixNano, b.UnixNano) })
	for i := range phases {
		phases[i].MS = float64(phases[i].UnixNano-phases[0].UnixNano) / float64(time.Millisecond)
	}
	return TimingsFile{Command: command, PID: os.Getpid(), Phases: phases, Dropped: t.dropped}
}

// write marks PhaseExit (always recorded, past the bound too) and writes
// the file.
func (t *timings) write(command string) error {
	t.mu.Lock()
	t.phases = append(t.phases, TimedPhase{Phase: PhaseExit, UnixNano: time.Now().UnixNano()})
	t.mu.Unlock()
	b, err := json.MarshalIndent(t.file(command), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(t.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("%s: %w", TimingsEnv, err)
	}
	return nil
}
