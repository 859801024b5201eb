package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// LevelResult is the cost of one apply level: a converged apply of a
// manifest holding one apply of a child with one stable file, against a
// converged apply of the child alone.
type LevelResult struct {
	Reps  int
	Tools []LevelTool
}

// LevelTool is one tool's figures.
type LevelTool struct {
	Name string
	// Child and Parent are median wall times of whole processes.
	Child, Parent time.Duration
	// ChildRun and ParentRun are median run durations from manifold's
	// report (duration_ms): the engine's time without process start and
	// stop. Zero for CCM.
	ChildRun, ParentRun time.Duration
	Err                 error
}

// runLevel measures the cost of one apply level for manifold and, when
// given, CCM, alternating the tools run by run.
func (h *harness) runLevel(ctx context.Context) (*LevelResult, error) {
	tools := []tool{manifoldTool(h.manifold)}
	if h.ccm != "" {
		tools = append(tools, ccmTool(h.ccm))
	}
	reps := h.cfg.Reps
	res := &LevelResult{Reps: reps}
	type state struct {
		tool          tool
		child, parent string
		walls         map[bool][]time.Duration
		runs          map[bool][]time.Duration
		err           error
	}
	var states []*state
	for _, t := range tools {
		base := filepath.Join(h.work, t.name, "level")
		spec := filesSpec{dir: filepath.Join(base, "files"), n: 1, owner: h.id.owner, group: h.id.group}
		if err := h.mkdirs(spec.dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(base, "child"), 0o755); err != nil {
			return nil, err
		}
		st := &state{tool: t, child: filepath.Join(base, "child", "manifest.yaml"), parent: filepath.Join(base, "manifest.yaml"),
			walls: map[bool][]time.Duration{}, runs: map[bool][]time.Duration{}}
		if err := spec.write(st.child); err != nil {
			return nil, err
		}
		if err := os.WriteFile(st.parent, []byte(applyLevelYAML("child/manifest.yaml")), 0o644); err != nil {
			return nil, err
		}
		states = append(states, st)
	}
	timeout := h.cfg.timeoutFor(1)
	// once runs the parent (parent=true) or the child alone, converged.
	once := func(st *state, parent bool, want int) (sample, time.Duration, error) {
		m := st.child
		if parent {
			m = st.parent
		}
		s := h.run.run(ctx, timeout, filepath.Dir(m), st.tool.bin, st.tool.args(ScenarioConverged, m)...)
		if s.err != nil {
			return s, 0, s.err
		}
		if err := st.tool.check(s.stdout, want); err != nil {
			return s, 0, fmt.Errorf("%s %s: %w", st.tool.name, m, err)
		}
		var run time.Duration
		if st.tool.name == "manifold" {
			if r, err := parseReport(s.stdout); err == nil {
				run = r.runTime()
			}
		}
		return s, run, nil
	}
	for _, st := range states {
		// The first apply creates the file (the report counts the
		// apply resource, not the child's resources: not checked).
		if _, _, err := once(st, true, -1); err != nil {
			st.err = err
		}
	}
	for rep := range reps {
		order := slices.Clone(states)
		if rep%2 == 1 {
			slices.Reverse(order)
		}
		for _, st := range order {
			for _, parent := range []bool{false, true} {
				if st.err != nil {
					continue
				}
				s, run, err := once(st, parent, 0)
				if err != nil {
					st.err = err
					continue
				}
				st.walls[parent] = append(st.walls[parent], s.wall)
				st.runs[parent] = append(st.runs[parent], run)
			}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	for _, st := range states {
		res.Tools = append(res.Tools, LevelTool{Name: st.tool.name,
			Child: median(st.walls[false]), Parent: median(st.walls[true]),
			ChildRun: median(st.runs[false]), ParentRun: median(st.runs[true]), Err: st.err})
		h.log.Info("apply level", "tool", st.tool.name, "child", median(st.walls[false]), "parent", median(st.walls[true]), "error", st.err)
	}
	return res, nil
}
