package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestApplyTimingsFileHoldsOrderedPhases: with MANIFOLD_TIMINGS set, an
// embedded apply writes every phase once, in time order, the command's
// own phases in the order it goes through them and the engine's in the
// order it starts; stdout is the report it prints without it.
func TestApplyTimingsFileHoldsOrderedPhases(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "motd")
	manifest := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("resources:\n  - file:\n      - "+target+": {ensure: present, content: \"hi\\n\"}\n"), 0o644))
	path := filepath.Join(dir, "timings.json")
	env := func(k string) string {
		if k == TimingsEnv {
			return path
		}
		return ""
	}
	var out, errOut bytes.Buffer
	entered := time.Now()
	code := Run(context.Background(), IO{Stdout: &out, Stderr: &errOut, Getenv: env, MainEntered: entered},
		[]string{"apply", "--output", "json", manifest})
	require.Equal(t, ExitOK, code, "stderr:\n%s", errOut.String())
	var rep struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), "stdout is the report alone:\n%s", out.String())
	require.Equal(t, "succeeded", rep.Status)

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f TimingsFile
	require.NoError(t, json.Unmarshal(b, &f))
	require.Equal(t, "apply", f.Command)
	require.Equal(t, os.Getpid(), f.PID)
	require.Zero(t, f.Dropped)

	at := map[string]int64{}
	var names []string
	for i, p := range f.Phases {
		_, dup := at[p.Phase]
		require.False(t, dup, "phase %s twice", p.Phase)
		at[p.Phase] = p.UnixNano
		names = append(names, p.Phase)
		if i > 0 {
			require.GreaterOrEqual(t, p.UnixNano, f.Phases[i-1].UnixNano, "phases out of time order: %v", names)
			require.GreaterOrEqual(t, p.MS, f.Phases[i-1].MS)
		}
	}
	require.Equal(t, PhaseMain, f.Phases[0].Phase)
	require.Equal(t, entered.UnixNano(), f.Phases[0].UnixNano)
	require.Zero(t, f.Phases[0].MS)
	require.Equal(t, PhaseExit, f.Phases[len(f.Phases)-1].Phase)
	inOrder := func(phases ...string) {
		t.Helper()
		for i, p := range phases {
			_, ok := at[p]
			require.True(t, ok, "phase %s missing from %v", p, names)
			if i > 0 {
				require.LessOrEqual(t, at[phases[i-1]], at[p], "%s after %s: %v", phases[i-1], p, names)
			}
		}
	}
	// The command's path.
	inOrder(PhaseMain, PhaseCommand, PhaseFacts, PhaseCompiled, PhaseBundlePacked, PhaseTelemetry, PhaseEngineReady,
		PhaseRunSubmitted, PhaseRunFinished, PhaseReportRead, PhaseReportWritten, PhaseEngineStopped, PhaseExit)
	// The engine's, side by side with it; its worker needs the facts, the
	// bundle's put the packed bundle, and both are done when the command
	// has the engine.
	inOrder(PhaseCommand, PhaseEngineStore, PhaseEngineServer, PhaseEngineConnected, PhaseEngineStreams,
		PhaseEngineCoordinator, PhaseEngineWorker, PhaseEngineReady)
	inOrder(PhaseFacts, PhaseEngineWorker)
	inOrder(PhaseEngineStreams, PhaseBundleStored, PhaseEngineReady)
	inOrder(PhaseBundlePacked, PhaseBundleStored)
	require.Len(t, f.Phases, 20, "%v", names)
}

// TestTimingsFileOtherCommands: any command writes its phases (validate:
// main, exit); an unwritable file is reported on stderr and changes
// neither the output nor the exit code.
func TestTimingsFileOtherCommands(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("resources:\n  - exec:\n      - x: {command: /bin/true}\n"), 0o644))
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{
		{"written", filepath.Join(dir, "t.json"), true},
		{"unwritable", filepath.Join(dir, "no-such-dir", "t.json"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := func(k string) string {
				if k == TimingsEnv {
					return tc.path
				}
				return ""
			}
			code := Run(context.Background(), IO{Stdout: &out, Stderr: &errOut, Getenv: env, MainEntered: time.Now()}, []string{"validate", manifest})
			require.Equal(t, ExitOK, code)
			require.Equal(t, manifest+": valid, 1 resource\n", out.String())
			b, err := os.ReadFile(tc.path)
			if !tc.ok {
				require.ErrorIs(t, err, os.ErrNotExist)
				require.Contains(t, errOut.String(), "manifold: "+TimingsEnv+": ")
				return
			}
			require.NoError(t, err)
			require.Empty(t, errOut.String())
			var f TimingsFile
			require.NoError(t, json.Unmarshal(b, &f))
			require.Equal(t, "validate", f.Command)
			var names []string
			for _, p := range f.Phases {
				names = append(names, p.Phase)
			}
			require.Equal(t, []string{PhaseMain, PhaseExit}, names)
		})
	}
}

// TestTimingsBound: past 256 marks, marks are dropped and counted; the
// exit is recorded all the same.
func TestTimingsBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	ctx, rec := withTimings(context.Background(), path, time.Now())
	for range maxTimedPhases + 9 { // main + 265 marks: 10 past the bound
		mark(ctx, PhaseCommand)
	}
	mark(context.Background(), PhaseCommand) // no recorder: nothing
	require.NoError(t, rec.write("apply"))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var f TimingsFile
	require.NoError(t, json.Unmarshal(b, &f))
	require.Len(t, f.Phases, maxTimedPhases+1)
	require.Equal(t, 10, f.Dropped)
	require.Equal(t, PhaseExit, f.Phases[len(f.Phases)-1].Phase)
	require.True(t, slices.IsSortedFunc(f.Phases, func(a, b TimedPhase) int { return cmp.Compare(a.UnixNano, b.UnixNano) }))
}
