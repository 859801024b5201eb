package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// subjects are the subjects stream keeps under filter.
func subjects(t *testing.T, ctx context.Context, b *bus.Bus, stream, filter string) []string {
	t.Helper()
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	require.NoError(t, err)
	var got []string
	for subj := range info.State.Subjects {
		got = append(got, subj)
	}
	return got
}

// TestFanOutFoldsChildren: at its end a fan-out folds its children's
// reports into its own stored report and purges what the children left
// on the bus (records, active marks, reports; after the grace the
// tree's events, the fan-out's own included, in one purge): the streams
// keep the fan-out's record and report only, whatever the number of
// hosts. The fan-out's report still shows every host's resources, and a
// child's run ID still answers with its report.
func TestFanOutFoldsChildren(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true, coord: coordinator.Config{FoldEventsGrace: 100 * time.Millisecond}})
	hosts := []string{"w1", "w2", "w3"}
	for _, name := range hosts {
		w, err := worker.New(worker.Config{Bus: bustest.Open(t, tb.srv, bus.Config{}), Registry: builtin.Registry(),
			Name: name, Pools: []string{"web"}, Logger: testLogger(t), Facts: map[string]any{"name": name}})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		t.Cleanup(w.Kill)
	}
	dir := t.TempDir()
	manifest := fmt.Sprintf(`
resources:
  - file:
      - "%[1]s/{{ lookup('facts.name') }}.conf":
          content: "host {{ lookup('facts.name') }}"
      - "%[1]s/{{ lookup('facts.name') }}.other":
          content: "other"
`, dir)
	ctx := t.Context()
	for range 2 { // a second fan-out: its purge leaves the first's report alone
		runID := tb.submit(t, manifest, func(r *bus.RunRequest) { r.EachWorker, r.Pool = true, "web" })
		rep, _ := tb.wait(t, runID)
		require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
		require.Len(t, rep.Resources, len(hosts))
		var children []string
		for i, res := range rep.Resources {
			require.NotNil(t, res.Child, "host %s", res.Name)
			require.Equal(t, res.ChildRunID, res.Child.RunID)
			require.Len(t, res.Child.Resources, 2)
			require.Equal(t, fmt.Sprintf("file#%s/%s.conf", dir, hosts[i]), res.Child.Resources[0].Ref)
			require.Equal(t, hosts[i], res.Child.Resources[0].Worker)
			children = append(children, res.ChildRunID)
		}

		// Records, active marks and reports of the children go at once,
		// their events after the grace.
		var runKeys, reports, events []string
		require.Eventually(t, func() bool {
			runKeys = subjects(t, ctx, tb.bus, "KV_"+bus.BucketRuns, "$KV."+bus.BucketRuns+".>")
			reports = subjects(t, ctx, tb.bus, "OBJ_"+bus.BucketReports, "$O."+bus.BucketReports+".M.>")
			events = subjects(t, ctx, tb.bus, bus.StreamEvents, "manifold.events."+runID+".>")
			for _, s := range append(append(runKeys, reports...), events...) {
				for _, c := range children {
					if strings.Contains(s, c) {
						return false
					}
				}
			}
			return true
		}, 20*time.Second, 20*time.Millisecond, "the children's records, reports or events were not purged")
		// After the grace the tree's events go in one purge, the
		// fan-out's own with its children's: its report keeps them all.
		require.Eventually(t, func() bool {
			return len(subjects(t, ctx, tb.bus, bus.StreamEvents, "manifold.events."+runID+".>")) == 0
		}, 20*time.Second, 20*time.Millisecond, "the fan-out's events were not purged")

		// The fan-out's report, read again, has every host's resources;
		// a child's ID answers with its folded report.
		again, err := coordinator.GetReport(ctx, tb.bus, runID)
		require.NoError(t, err)
		for i, res := range again.Resources {
			require.NotNil(t, res.Child)
			require.Len(t, res.Child.Resources, 2, "host %s", hosts[i])
		}
		child, err := coordinator.GetReport(ctx, tb.bus, children[1])
		require.NoError(t, err)
		require.Equal(t, children[1], child.RunID)
		require.Equal(t, coordinator.RunSucceeded, child.Status)
		require.Equal(t, "w2", child.Resources[0].Worker)
	}
	// Two fan-outs: two reports and two run records, none of a child.
	require.Len(t, subjects(t, ctx, tb.bus, "OBJ_"+bus.BucketReports, "$O."+bus.BucketReports+".M.>"), 2)
	require.Len(t, subjects(t, ctx, tb.bus, "KV_"+bus.BucketRuns, "$KV."+bus.BucketRuns+".run.>"), 2)
	_, err := coordinator.GetReport(ctx, tb.bus, "nosuchrun-a0")
	require.ErrorIs(t, err, bus.ErrNotFound)
}

// TestReportsBoundedByCount: past Config.MaxReports the oldest reports
// are removed with their runs' records; the newest stay readable.
func TestReportsBoundedByCount(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{coord: coordinator.Config{MaxReports: 3, PruneInterval: time.Millisecond}})
	ctx := t.Context()
	var ids []string
	for range 6 {
		rep := tb.run(t, "resources: []\n")
		require.Equal(t, coordinator.RunSucceeded, rep.Status)
		ids = append(ids, rep.RunID)
		// The delete marker of a tree's child-run count, as a root run
		// with child runs leaves when it ends.
		_, err := tb.bus.Runs().Put(ctx, "tree."+rep.RunID, []byte("1"))
		require.NoError(t, err)
		require.NoError(t, tb.bus.Runs().Delete(ctx, "tree."+rep.RunID))
	}
	require.Eventually(t, func() bool {
		return len(subjects(t, ctx, tb.bus, "OBJ_"+bus.BucketReports, "$O."+bus.BucketReports+".M.>")) == 3 &&
			len(subjects(t, ctx, tb.bus, "KV_"+bus.BucketRuns, "$KV."+bus.BucketRuns+".run.>")) == 3 &&
			len(subjects(t, ctx, tb.bus, "KV_"+bus.BucketRuns, "$KV."+bus.BucketRuns+".tree.>")) == 3
	}, 20*time.Second, 20*time.Millisecond, "reports, records and tree markers not bounded at 3")
	for _, id := range ids[:3] {
		_, err := coordinator.GetReport(ctx, tb.bus, id)
		require.ErrorIs(t, err, bus.ErrNotFound, "run %s", id)
	}
	for _, id := range ids[3:] {
		rep, err := coordinator.GetReport(ctx, tb.bus, id)
		require.NoError(t, err)
		require.Equal(t, coordinator.RunSucceeded, rep.Status)
	}
}

// TestFoldedEventsWaitForFollowers: a folded fan-out's tree events are
// purged once no follower has some left to be sent, FoldEventsSettle
// after the fan-out's end, not at the end of the grace (a minute here);
// a follower behind on them keeps them until it has been sent them all.
func TestFoldedEventsWaitForFollowers(t *testing.T) {
	t.Parallel()
	const settle = 100 * time.Millisecond
	tb := setup(t, setupOpts{noWorker: true, coord: coordinator.Config{FoldEventsGrace: time.Minute, FoldEventsSettle: settle}})
	for _, name := range []string{"w1", "w2"} {
		w, err := worker.New(worker.Config{Bus: bustest.Open(t, tb.srv, bus.Config{}), Registry: builtin.Registry(),
			Name: name, Pools: []string{"web"}, Logger: testLogger(t), Facts: map[string]any{"name": name}})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		t.Cleanup(w.Kill)
	}
	manifest := fmt.Sprintf("resources:\n  - file:\n      - \"%s/{{ lookup('facts.name') }}.conf\":\n          content: x\n", t.TempDir())
	ctx := t.Context()
	events := func(runID string) int {
		return len(subjects(t, ctx, tb.bus, bus.StreamEvents, bus.EventsOfRun(runID)))
	}
	fanOut := func() string {
		runID := tb.submit(t, manifest, func(r *bus.RunRequest) { r.EachWorker, r.Pool = true, "web" })
		rep, _ := tb.wait(t, runID)
		require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
		require.NotZero(t, events(runID), "the tree's events are there when the fan-out ends")
		return runID
	}

	// No follower: purged a settle after the end, not a minute.
	runID := fanOut()
	require.Eventually(t, func() bool { return events(runID) == 0 }, 20*time.Second, 10*time.Millisecond,
		"the events of a fan-out nobody follows were not purged within 20 s (the grace is a minute)")

	// A follower of every event, created before the fan-out, that reads
	// nothing yet.
	js, err := jetstream.New(tb.bus.Conn())
	require.NoError(t, err)
	s, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)
	follower, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, FilterSubject: "manifold.events.>"})
	require.NoError(t, err)
	runID = fanOut()
	// Ten settles: the readers have been looked at several times, and
	// the follower is still behind.
	behind := time.NewTimer(10 * settle)
	<-behind.C
	require.NotZero(t, events(runID), "the events were purged while a follower had them left to read")
	// It reads them all: they go.
	for {
		info, err := follower.Info(ctx)
		require.NoError(t, err)
		if info.NumPending == 0 {
			break
		}
		batch, err := follower.Fetch(int(min(info.NumPending, 500)), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for range batch.Messages() {
		}
		require.NoError(t, batch.Error())
	}
	require.Eventually(t, func() bool { return events(runID) == 0 }, 20*time.Second, 10*time.Millisecond,
		"the events were not purged once the follower had read them")
}
