package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/manifold-run/manifold/internal/cli"
)

// cell holds the samples of one tool in one scenario at one size.
type cell struct {
	samples []sample
	// err is the first failure; later repetitions are not run.
	err error
}

// ok returns the successful samples.
func (c *cell) ok() []sample {
	var out []sample
	for _, s := range c.samples {
		if s.err == nil {
			out = append(out, s)
		}
	}
	return out
}

// wall returns the median wall time of the successful samples.
func (c *cell) wall() time.Duration {
	var ds []time.Duration
	for _, s := range c.ok() {
		ds = append(ds, s.wall)
	}
	return median(ds)
}

// cpu returns the median CPU time (user and system) of the successful
// samples.
func (c *cell) cpu() time.Duration {
	var ds []time.Duration
	for _, s := range c.ok() {
		ds = append(ds, s.cpu)
	}
	return median(ds)
}

// rssKiB returns the median peak RSS of the successful samples.
func (c *cell) rssKiB() int64 {
	var ds []time.Duration
	for _, s := range c.ok() {
		ds = append(ds, time.Duration(s.rssKiB))
	}
	return int64(median(ds))
}

// FilesResult is the measurement of one size: per scenario, per tool, the
// samples; the manifold/CCM ratio of each pair; the floor.
type FilesResult struct {
	N     int
	Reps  int
	Tools []string
	cells map[Scenario]map[string]*cell
	// ratios holds manifold/CCM wall time per pair that both completed.
	ratios map[Scenario][]float64
	floor  map[Scenario]time.Duration
	// floorErr is why the floor has no figures.
	floorErr error
	// note explains skipped tools.
	note string
	// breakdowns are where the wall time of manifold's converged applies
	// went (breakdownScenario), one per repetition whose timings file
	// could be read; breakdownErr is the first one that could not.
	breakdowns   []breakdown
	breakdownErr error
}

// breakdownScenario is the scenario whose manifold runs write their
// phases (cli.TimingsEnv) for the breakdown table.
const breakdownScenario = ScenarioConverged

// toolState is a tool's manifest and files at one size.
type toolState struct {
	tool     tool
	spec     filesSpec
	manifest string
	failed   error
}

// runFiles measures every scenario at size n for the tools, pair by pair:
// each repetition runs each tool once, the order alternating between
// repetitions, so both see the same machine load.
func (h *harness) runFiles(ctx context.Context, n, reps int, tools []tool) (*FilesResult, error) {
	res := &FilesResult{N: n, Reps: reps, cells: map[Scenario]map[string]*cell{}, ratios: map[Scenario][]float64{}}
	var states []*toolState
	for _, t := range tools {
		base := filepath.Join(h.work, t.name, fmt.Sprintf("n%d", n))
		spec := filesSpec{dir: filepath.Join(base, "files"), n: n, owner: h.id.owner, group: h.id.group, exec: true}
		if err := h.mkdirs(spec.dir); err != nil {
			return nil, err
		}
		st := &toolState{tool: t, spec: spec, manifest: filepath.Join(base, "manifest.yaml")}
		if err := spec.write(st.manifest); err != nil {
			return nil, err
		}
		states = append(states, st)
		res.Tools = append(res.Tools, t.name)
	}
	timeout := h.cfg.timeoutFor(n)
	for _, sc := range scenarios {
		res.cells[sc] = map[string]*cell{}
		for _, st := range states {
			res.cells[sc][st.tool.name] = &cell{}
		}
	}
	for _, block := range scenarioBlocks {
		for rep := range reps {
			order := slices.Clone(states)
			if rep%2 == 1 {
				slices.Reverse(order)
			}
			for _, sc := range turn(block, rep) {
				if err := h.runCell(ctx, res, order, sc, n, rep, timeout); err != nil {
					return res, err
				}
			}
		}
	}
	floorSpec := filesSpec{dir: filepath.Join(h.work, "floor", fmt.Sprintf("n%d", n)), n: n, exec: true}
	if err := os.MkdirAll(floorSpec.dir, 0o755); err != nil {
		return nil, err
	}
	res.floor, res.floorErr = floorRun(floorSpec, h.id.uid, h.id.gid, reps)
	if res.floorErr != nil {
		h.log.Warn("floor failed", "n", n, "error", res.floorErr)
	}
	return res, nil
}

// turn is the order of block's scenarios in repetition rep: each
// repetition starts one further, so the machine's drift over the block
// falls on each alike.
func turn(block []Scenario, rep int) []Scenario {
	out := make([]Scenario, 0, len(block))
	for k := range block {
		out = append(out, block[(rep+k)%len(block)])
	}
	return out
}

// runCell runs scenario sc once for each tool, in order, and records the
// samples, the breakdown of manifold's converged apply and the
// manifold/CCM ratio of the pair.
func (h *harness) runCell(ctx context.Context, res *FilesResult, order []*toolState, sc Scenario, n, rep int, timeout time.Duration) error {
	walls := map[string]time.Duration{}
	for _, st := range order {
		c := res.cells[sc][st.tool.name]
		if st.failed != nil {
			if c.err == nil {
				c.err = fmt.Errorf("not run: %w", st.failed)
			}
			continue
		}
		timings := ""
		if sc == breakdownScenario && st.tool.name == "manifold" {
			timings = filepath.Join(h.run.home, fmt.Sprintf("timings-%d-%d.json", n, rep))
		}
		s := h.runScenario(ctx, st, sc, timeout, timings)
		c.samples = append(c.samples, s)
		if timings != "" && s.err == nil {
			b, err := readTimings(timings, s)
			if err == nil {
				res.breakdowns = append(res.breakdowns, b)
			} else if res.breakdownErr == nil {
				res.breakdownErr = err
			}
		}
		if s.err != nil {
			c.err, st.failed = s.err, s.err
			h.log.Warn("run failed", "tool", st.tool.name, "n", n, "scenario", sc, "error", s.err)
			continue
		}
		walls[st.tool.name] = s.wall
		h.log.Info("run", "tool", st.tool.name, "n", n, "scenario", sc, "rep", rep+1,
			"wall", s.wall.Round(time.Millisecond), "cpu", s.cpu.Round(time.Millisecond), "rss_mib", s.rssKiB/1024)
	}
	if m, ok := walls["manifold"]; ok {
		if c, ok := walls["CCM"]; ok && c > 0 {
			res.ratios[sc] = append(res.ratios[sc], float64(m)/float64(c))
		}
	}
	return ctx.Err()
}

// readTimings reads and removes the timings file of sample s.
func readTimings(path string, s sample) (breakdown, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return breakdown{}, fmt.Errorf("%w: %w", errTimings, err)
	}
	_ = os.Remove(path)
	return parseTimings(b, s.start, s.wall)
}

// runScenario prepares the state a scenario starts from, runs the tool
// once and checks what it did. A timings path makes manifold write its
// phases there (cli.TimingsEnv).
func (h *harness) runScenario(ctx context.Context, st *toolState, sc Scenario, timeout time.Duration, timings string) sample {
	want := -1
	switch sc {
	case ScenarioFirst:
		if err := clean(st.spec.dir); err != nil {
			return sample{err: err}
		}
		want = st.spec.resources()
	case ScenarioConverged, ScenarioNoop:
		want = 0
	case ScenarioDrift:
		k, err := st.spec.drift()
		if err != nil {
			return sample{err: err}
		}
		want = k
	}
	var env []string
	if timings != "" {
		env = []string{cli.TimingsEnv + "=" + timings}
	}
	s := h.run.runEnv(ctx, timeout, filepath.Dir(st.manifest), env, st.tool.bin, st.tool.args(sc, st.manifest)...)
	if s.err != nil {
		return s
	}
	out := s.stdout
	s.stdout = nil
	if err := st.tool.check(out, want); err != nil {
		s.err = fmt.Errorf("%s %s of %d files: %w", st.tool.name, sc, st.spec.n, err)
		return s
	}
	if sc == ScenarioFirst || sc == ScenarioDrift {
		if err := st.spec.verify(); err != nil {
			s.err = fmt.Errorf("%s %s of %d files: %w", st.tool.name, sc, st.spec.n, err)
		}
	}
	return s
}
