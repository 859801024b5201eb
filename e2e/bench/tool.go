package bench

import (
	"encoding/json"
	"fmt"
	"time"
)

// Scenario is one measured operation on a manifest of files.
type Scenario string

// The scenarios, in the order they run (each leaves the state the next
// one needs).
const (
	ScenarioValidate  Scenario = "validate"
	ScenarioFirst     Scenario = "first apply"
	ScenarioConverged Scenario = "converged apply"
	ScenarioNoop      Scenario = "noop"
	ScenarioDrift     Scenario = "3-file drift"
)

// scenarios lists the scenarios in running order.
var scenarios = []Scenario{ScenarioValidate, ScenarioFirst, ScenarioConverged, ScenarioNoop, ScenarioDrift}

// scenarioBlocks are the scenarios in the order they are measured: each
// block's repetitions one after the other, and within a block the
// scenarios taking turns (runFiles). Converged, noop and drift share a
// block: they are compared with each other (issue 21: within 10 %), and
// measured in blocks of their own they met different moments of the
// machine (the writeback of the first applies, a load that came and
// went).
var scenarioBlocks = [][]Scenario{{ScenarioValidate}, {ScenarioFirst}, {ScenarioConverged, ScenarioNoop, ScenarioDrift}}

// tool is a configuration-management binary under test.
type tool struct {
	name string
	bin  string
	// args returns the command line of a scenario on manifest m.
	args func(sc Scenario, m string) []string
	// check inspects a successful run's stdout; want is the number of
	// resources the scenario must report changed (-1: do not check).
	check func(stdout []byte, want int) error
}

// manifoldTool runs the manifold binary: `validate` (parse, schemas,
// references, names, plan) and the embedded `apply` with the JSON report,
// whose counts are checked.
func manifoldTool(bin string) tool {
	return tool{
		name: "manifold",
		bin:  bin,
		args: func(sc Scenario, m string) []string {
			switch sc {
			case ScenarioValidate:
				return []string{"validate", m}
			case ScenarioNoop:
				return []string{"apply", "--noop", "--output", "json", m}
			default:
				return []string{"apply", "--output", "json", m}
			}
		},
		check: checkManifoldReport,
	}
}

// ccmTool runs a CCM binary: `apply --render` (parse, data, templates; the
// nearest CCM has to validate) and `apply`. CCM's own output is not
// checked; the harness checks the files instead.
func ccmTool(bin string) tool {
	return tool{
		name: "CCM",
		bin:  bin,
		args: func(sc Scenario, m string) []string {
			switch sc {
			case ScenarioValidate:
				return []string{"apply", "--render", m}
			case ScenarioNoop:
				return []string{"apply", "--noop", m}
			default:
				return []string{"apply", m}
			}
		},
		check: func([]byte, int) error { return nil },
	}
}

// runReport is the part of manifold's run report the harness reads.
type runReport struct {
	RunID      string    `json:"run_id"`
	Status     string    `json:"status"`
	DurationMS int64     `json:"duration_ms"`
	Error      string    `json:"error"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Counts     struct {
		Total   int `json:"total"`
		Changed int `json:"changed"`
		Failed  int `json:"failed"`
	} `json:"counts"`
	Resources []struct {
		Ref        string     `json:"ref"`
		Status     string     `json:"status"`
		DurationMS int64      `json:"duration_ms"`
		Child      *runReport `json:"child"`
	} `json:"resources"`
}

// runTime is the run's time from the report's start and end stamps
// (nanoseconds), else its duration_ms.
func (r *runReport) runTime() time.Duration {
	if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		return r.FinishedAt.Sub(r.StartedAt)
	}
	return time.Duration(r.DurationMS) * time.Millisecond
}

// parseReport decodes a run report printed by --output json.
func parseReport(stdout []byte) (*runReport, error) {
	var r runReport
	if err := json.Unmarshal(stdout, &r); err != nil {
		return nil, fmt.Errorf("run report: %w", err)
	}
	if r.Status != "succeeded" {
		return &r, fmt.Errorf("run %s %s: %d failed; %s", r.RunID, r.Status, r.Counts.Failed, r.Error)
	}
	return &r, nil
}

// checkManifoldReport checks the report of an apply (validate prints no
// report).
func checkManifoldReport(stdout []byte, want int) error {
	if want < 0 {
		return nil
	}
	r, err := parseReport(stdout)
	if err != nil {
		return err
	}
	if r.Counts.Changed != want {
		return fmt.Errorf("run %s: %d resources changed, want %d", r.RunID, r.Counts.Changed, want)
	}
	return nil
}
