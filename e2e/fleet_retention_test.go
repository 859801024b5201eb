package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestFleetRetention, with real processes (a server, a coordinator, three
// workers), holds the readers of a fan-out to the retention contract
// (docs/fleet-scale.md#retention): `run --each-worker --follow` prints
// every host's resources and ends (its consumer keeps the tree's events
// while it reads them); after the fold `manifold status` answers for the
// fan-out and for a child run from the fan-out's report, and `manifold
// runs` lists the fan-out, not its children; the tree's events are still
// there for a follower that starts late (they go 30 s after the fan-out
// ended: TestFoldedEventsWaitForFollowers covers when).
func TestFleetRetention(t *testing.T) {
	t.Parallel()
	c := distStart(t)
	var ps []*process
	for _, name := range []string{"w1", "w2", "w3"} {
		ps = append(ps, start(t, runOpts{}, "worker", "--server", c.url, "--name", name, "--pool", "default", "--fact", "node="+name,
			"--cache-dir", filepath.Join(c.dir, "cache-"+name), "--drain-timeout", "5s"))
	}
	t.Cleanup(func() {
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	c.waitWorkers(t, func(names []string) bool {
		return slices.Contains(names, "w1") && slices.Contains(names, "w2") && slices.Contains(names, "w3")
	})
	dir, out := t.TempDir(), t.TempDir()
	site := writeFile(t, dir, "site.yaml", fmt.Sprintf(`resources:
  - file:
      - "%s/{{ lookup('facts.node') }}.conf":
          content: "converged"
`, out))

	r := c.run(t, "run", "--each-worker", "--follow", site)
	wantCode(t, r, 0)
	for _, w := range []string{"w1", "w2", "w3"} {
		if !strings.Contains(r.stdout, out+"/"+w+".conf") {
			t.Errorf("the follower printed nothing of %s's file:\n%s", w, r)
		}
	}
	m := regexp.MustCompile(`(?m)^run (\S+) succeeded`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no run line:\n%s", r)
	}
	fanOut := m[1]
	ended := time.Now()

	js, err := jetstream.New(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	events := func() int {
		s, err := js.Stream(t.Context(), "MANIFOLD_EVENTS")
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(t.Context(), jetstream.WithSubjectFilter("manifold.events."+fanOut+".>"))
		if err != nil {
			t.Fatal(err)
		}
		return len(info.State.Subjects)
	}
	children := func() []string {
		rs := c.run(t, "status", "--output", "json", fanOut)
		wantCode(t, rs, 0)
		rep := decodeReport(t, rs)
		var ids []string
		for _, res := range rep.Resources {
			if res.Child == nil || res.Child.Status != "succeeded" || len(res.Child.Resources) != 1 {
				t.Fatalf("host %s: no folded child report in the fan-out's:\n%s", res.Name, rs)
			}
			ids = append(ids, res.Child.RunID)
		}
		if len(ids) != 3 {
			t.Fatalf("%d children in the fan-out's report, want 3:\n%s", len(ids), rs)
		}
		return ids
	}
	statusOfChild := func(id string) {
		rs := c.run(t, "status", id)
		wantCode(t, rs, 0)
		if !strings.Contains(rs.stdout, "converged") && !strings.Contains(rs.stdout, out) {
			t.Errorf("status of child %s does not show its resource:\n%s", id, rs)
		}
	}

	ids := children()
	for _, id := range ids {
		statusOfChild(id)
	}
	rr := c.run(t, "runs")
	wantCode(t, rr, 0)
	if !strings.Contains(rr.stdout, fanOut) {
		t.Errorf("manifold runs does not list the fan-out %s:\n%s", fanOut, rr)
	}
	for _, id := range ids {
		if strings.Contains(rr.stdout, id) {
			t.Errorf("manifold runs lists the folded child %s:\n%s", id, rr)
		}
	}

	// A follower starting now still finds the tree's events (the grace
	// is 30 s; the commands above took less, unless the machine is
	// very loaded: then this check is skipped).
	if time.Since(ended) < 20*time.Second {
		if n := events(); n == 0 {
			t.Errorf("the fan-out's events were purged %s after it ended, before the grace", time.Since(ended))
		}
	}
	if got := children(); strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("children %v read again, want %v", got, ids)
	}
	statusOfChild(ids[1])
}
