package ui

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/facts"
	"github.com/manifold-run/manifold/worker"
)

// fleetRuns is how many of the newest runs the fleet page lists.
const fleetRuns = 10

type fleetPage struct {
	Title   string
	Now     time.Time
	Workers []workerRow
	Pools   []poolRow
	Runs    []bus.RunSummary
	// Unreadable counts registrations that could not be decoded.
	Unreadable int
}

type workerRow struct {
	worker.Registration
	Host, OS    string
	Assignments []assignmentRow
}

type assignmentRow struct {
	Name string
	worker.AssignmentStatus
}

type poolRow struct {
	Name    string
	Workers []string
	// States counts the assignments of the pool's workers by state.
	States map[string]int
}

func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.reqCtx(r)
	defer cancel()
	b := s.cfg.Bus
	page := fleetPage{Title: "Fleet", Now: time.Now()}
	keys, err := b.Workers().Keys(ctx)
	if err != nil && !errors.Is(err, bus.ErrNotFound) {
		s.fail(w, r, http.StatusBadGateway, "read the workers bucket: "+err.Error())
		return
	}
	pools := map[string]*poolRow{}
	for _, k := range keys {
		e, err := b.Workers().Get(ctx, k)
		if errors.Is(err, bus.ErrNotFound) {
			continue // expired meanwhile
		} else if err != nil {
			s.fail(w, r, http.StatusBadGateway, "read worker "+k+": "+err.Error())
			return
		}
		var reg worker.Registration
		if err := json.Unmarshal(e.Value, &reg); err != nil {
			page.Unreadable++
			continue
		}
		row := workerRow{Registration: reg}
		if v, ok := facts.Query(reg.Facts, "host.info.hostname"); ok {
			row.Host, _ = v.(string)
		}
		if v, ok := facts.Query(reg.Facts, "host.info.platform"); ok {
			row.OS, _ = v.(string)
		}
		for _, name := range slices.Sorted(maps.Keys(reg.Assignments)) {
			row.Assignments = append(row.Assignments, assignmentRow{Name: name, AssignmentStatus: reg.Assignments[name]})
		}
		page.Workers = append(page.Workers, row)
		for _, p := range reg.Pools {
			pr := pools[p]
			if pr == nil {
				pr = &poolRow{Name: p, States: map[string]int{}}
				pools[p] = pr
			}
			pr.Workers = append(pr.Workers, reg.Name)
			for _, a := range reg.Assignments {
				pr.States[string(a.State)]++
			}
		}
	}
	slices.SortFunc(page.Workers, func(a, b workerRow) int { return strings.Compare(a.Name, b.Name) })
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		slices.Sort(pools[name].Workers)
		page.Pools = append(page.Pools, *pools[name])
	}
	if page.Runs, err = coordinator.ListRuns(ctx, b, fleetRuns); err != nil {
		s.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	s.render(w, r, "fleet", "layout.html", http.StatusOK, page)
}
