package ui

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/graph"
)

const (
	// DefaultRunsLimit is how many runs /runs lists without ?limit=.
	DefaultRunsLimit = 50
	// MaxRunsLimit is the largest ?limit= /runs accepts: 1,000.
	MaxRunsLimit = 1000
)

// runStatuses are the values ?status= accepts.
var runStatuses = []string{
	string(coordinator.RunQueued), string(coordinator.RunRunning), string(coordinator.RunSucceeded),
	string(coordinator.RunFailed), string(coordinator.RunCancelled),
}

type runsPage struct {
	Title    string
	Status   string
	Limit    int
	Statuses []string
	Runs     []bus.RunSummary
}

func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := runsPage{Title: "Runs", Status: q.Get("status"), Limit: DefaultRunsLimit, Statuses: runStatuses}
	if page.Status != "" && !slices.Contains(runStatuses, page.Status) {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("status %q: want one of %s", page.Status, strings.Join(runStatuses, ", ")))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxRunsLimit {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("limit %q: want a number from 1 to %d", v, MaxRunsLimit))
			return
		}
		page.Limit = n
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	// ListRuns reads every record whatever its limit: ask for all, then
	// filter and cut.
	all, err := coordinator.ListRuns(ctx, s.cfg.Bus, 1<<30)
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	for _, run := range all {
		if page.Status != "" && run.Status != page.Status {
			continue
		}
		if page.Runs = append(page.Runs, run); len(page.Runs) == page.Limit {
			break
		}
	}
	if page.Status != "" {
		page.Title = "Runs: " + page.Status
	}
	s.render(w, r, "runs", "layout.html", http.StatusOK, page)
}

type runPage struct {
	Title  string
	RunID  string
	Report *coordinator.Report
	// SVG is the run's graph, sanitised; GraphError says why there is none.
	SVG        template.HTML
	GraphError string
	Rows       []resourceRow
	TraceURL   string
	Final      bool
	// Live is the fragment's URL, PollMS how often to fetch it.
	Live   string
	PollMS int64
}

// resourceRow is one resource of the run's table, children of apply
// resources indented under them.
type resourceRow struct {
	coordinator.ResourceReport
	Depth int
	// NodeID is the resource's node in the graph (for the anchor).
	NodeID string
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	page, status, err := s.runPage(r)
	if err != nil {
		s.fail(w, r, status, err.Error())
		return
	}
	s.render(w, r, "run", "layout.html", http.StatusOK, page)
}

// live serves the part of a run's page that changes while it runs.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	page, status, err := s.runPage(r)
	if err != nil {
		s.fail(w, r, status, err.Error())
		return
	}
	s.render(w, r, "run", "live", http.StatusOK, page)
}

func (s *Server) runPage(r *http.Request) (*runPage, int, error) {
	id := r.PathValue("run")
	if err := bus.ValidToken(id); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("run ID %w", err)
	}
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	rep, err := coordinator.GetReport(ctx, s.cfg.Bus, id)
	if errors.Is(err, bus.ErrNotFound) {
		return nil, http.StatusNotFound, fmt.Errorf("no run %s", id)
	} else if err != nil {
		return nil, http.StatusBadGateway, err
	}
	page := &runPage{Title: "Run " + id, RunID: id, Report: rep, Final: rep.Status.Final(),
		Live: "/runs/" + id + "/live", PollMS: s.cfg.PollInterval.Milliseconds()}
	if s.cfg.JaegerURL != "" && rep.TraceID != "" {
		page.TraceURL = s.cfg.JaegerURL + "/trace/" + rep.TraceID
	}
	g, err := s.graphOf(ctx, rep)
	if err != nil {
		page.GraphError = err.Error()
	} else {
		page.SVG, err = s.svgs.get(ctx, id, g)
		if err != nil {
			page.GraphError = err.Error()
		}
	}
	page.Rows = rows(rep.Resources, 0, "r", nil)
	return page, http.StatusOK, nil
}

// graphOf builds the run's graph; a queued run has none yet.
func (s *Server) graphOf(ctx context.Context, rep *coordinator.Report) (*graph.Graph, error) {
	if rep.Status == coordinator.RunQueued {
		return nil, errors.New("the run is queued: its graph is drawn once a coordinator has planned it")
	}
	return graph.FromRun(ctx, s.cfg.Bus, &s.plans, rep)
}

// rows flattens a report's resources, child runs' under their apply
// resource; node IDs follow the graph's (r3, r3_0...).
func rows(res []coordinator.ResourceReport, depth int, prefix string, out []resourceRow) []resourceRow {
	for i, rr := range res {
		id := prefix + strconv.Itoa(i)
		out = append(out, resourceRow{ResourceReport: rr, Depth: depth, NodeID: id})
		if rr.Child != nil && depth < graph.MaxDepth {
			out = rows(rr.Child.Resources, depth+1, id+"_", out)
		}
	}
	return out
}
