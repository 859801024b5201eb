package coordinator

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/manifold-run/manifold/bus"
)

// Folding a fan-out's children into the fan-out.
//
// A fan-out (each-worker or where run) has one child run per host, and
// each child left on the bus a run record, a stored report and its
// progress events, kept after the fan-out ended: per host and fan-out,
// subjects the server holds in memory for as long as they exist (records
// and reports for ever). At its end a fan-out now folds its children's
// reports into its own stored report (each under its apply#<host>
// resource, as GetReport nested them before), then purges the children's
// records and reports by subject at once and their events after
// Config.FoldEventsGrace (a follower still reading the tree's events gets
// them). What a fan-out keeps is then one record, one report and its own
// events, whatever the number of hosts.
//
// A child's report reaches the fold without a read when the child ended
// on the coordinator driving the fan-out (foldStash); otherwise, or after
// a restart, it is read from the reports store. A child that did not
// answer (cancelled at the fan-out's end, maybe still stopping) or had
// not ended by the fold is not folded: its report is read from its own
// record as before.

// DefaultFoldEventsGrace is the default of Config.FoldEventsGrace.
const DefaultFoldEventsGrace = 30 * time.Second

// DefaultFoldEventsSettle is the default of Config.FoldEventsSettle:
// the grace, so that by default a tree's events go 30 s after the
// fan-out ended, as before. Settled at 5 s (a follower started right
// after its submission was answered has its consumer by then) the
// server's heap did not move, and the fetches of large fan-outs' reports
// that followed were slow (at 10,000 hosts 48-78 s, 5.4 s earlier that
// day); with the 30 s grace they were slow too at times (at 5,000 hosts
// 2.5-11.5 s against 4.5-12.9 s). The purge was not the cause (the
// client's report decoder was, quadratic in the hosts: report_codec.go,
// readReport), but nothing is gained by the earlier one
// (docs/fleet-scale.md).
const DefaultFoldEventsSettle = DefaultFoldEventsGrace

// foldStash holds, for each fan-out this coordinator drives, its run
// secret and the reports of its children that ended here, until the
// fan-out folds them.
type foldStash struct {
	mu sync.Mutex
	m  map[string]*foldEntry
}

type foldEntry struct {
	secret  []byte
	reports map[string]*Report
	// starts holds a token per child run being started (fanOutStarts at
	// most), started counts them until they are (startChild).
	starts  chan struct{}
	started sync.WaitGroup
}

// fanOutStarts bounds the child runs of one fan-out being started at
// once.
const fanOutStarts = 32

// open registers a fan-out driven here.
func (s *foldStash) open(parent string, secret []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*foldEntry{}
	}
	if s.m[parent] == nil {
		s.m[parent] = &foldEntry{secret: secret, reports: map[string]*Report{}, starts: make(chan struct{}, fanOutStarts)}
	}
}

// startChild runs start, the start of a child run of parent, a fan-out
// opened here, in a goroutine of wg once fewer than fanOutStarts of its
// starts run (it waits for one to end). When ctx ends first nothing is
// started: the coordinator is stopping, and the one that resumes the
// fan-out starts the child. It reports false, running nothing, when
// parent is not open here.
func (s *foldStash) startChild(ctx context.Context, parent string, wg *sync.WaitGroup, start func()) bool {
	s.mu.Lock()
	e := s.m[parent]
	if e != nil {
		e.started.Add(1)
	}
	s.mu.Unlock()
	if e == nil {
		return false
	}
	select {
	case e.starts <- struct{}{}:
	case <-ctx.Done():
		e.started.Done()
		return true
	}
	wg.Go(func() {
		defer e.started.Done()
		defer func() { <-e.starts }()
		start()
	})
	return true
}

// secret is the run secret of parent, a fan-out driven here.
func (s *foldStash) secret(parent string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[parent]
	if !ok {
		return nil, false
	}
	return e.secret, true
}

// put keeps rep, the report of a child of parent, if parent is a fan-out
// driven here.
func (s *foldStash) put(parent string, rep *Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[parent]; e != nil {
		e.reports[rep.RunID] = rep
	}
}

// take waits until the child runs of parent being started are, forgets
// parent and returns the reports kept for its children.
func (s *foldStash) take(parent string) map[string]*Report {
	s.mu.Lock()
	e := s.m[parent]
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	e.started.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, parent)
	return e.reports
}

// parentSecret is the run secret of the parent of this child run: from
// the fan-out's entry when the fan-out is driven here (its header, which
// names every host, is not read and decoded once per host: at 1,000
// hosts that was 6 % of the coordinator's CPU, and it grows with the
// square of the hosts), else from the parent's header. ok is false when
// the parent has ended or its header cannot be read (err says which).
func (r *run) parentSecret(ctx context.Context) (secret []byte, ok bool, err error) {
	if secret, ok := r.c.folds.secret(r.rec.ParentRunID); ok {
		return secret, true, nil
	}
	parent, _, err := loadRecord(ctx, r.c.bus.Runs(), r.rec.ParentRunID)
	if err != nil {
		return nil, false, err
	}
	if parent.Status.Final() {
		r.log.Info("parent run has ended; child outcome not sent", "parent_status", parent.Status)
		return nil, false, nil
	}
	return parent.Secret, true, nil
}

// stashForParent keeps the report of a fan-out child that just ended for
// its fan-out, when this coordinator drives it. A child with child runs
// of its own is not kept: the fold reads it with theirs nested.
func (r *run) stashForParent(rep *Report) {
	rec := r.rec
	if rec.ParentRunID == "" || rec.Request.PinWorker == "" || !strings.HasSuffix(rec.Manifest, "@"+rec.Request.PinWorker) {
		return
	}
	for _, res := range rep.Resources {
		if res.ChildRunID != "" {
			return
		}
	}
	r.c.folds.put(rec.ParentRunID, rep)
}

// fold nests the reports of the fan-out's ended children in rep, its
// report about to be stored, and returns the run IDs folded (children
// and theirs), to purge once rep is stored.
func (r *run) fold(ctx context.Context, rep *Report) []string {
	stash := r.c.folds.take(r.rec.RunID)
	if !r.rec.Request.EachWorker {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(childReportReads)
	for i := range rep.Resources {
		id := rep.Resources[i].ChildRunID
		if id == "" || rep.Resources[i].Status == NoAnswer {
			// A silent host's child was cancelled just now and may still
			// be stopping: it keeps its own record and report.
			continue
		}
		if child, ok := stash[id]; ok {
			rep.Resources[i].Child = child
			continue
		}
		g.Go(func() error {
			child, err := getReport(gctx, r.c.bus, id, 1)
			if err != nil {
				if !errors.Is(err, bus.ErrNotFound) {
					r.log.Warn("child report not folded; it stays with its run", "child_run_id", id, "error", err)
				}
				return nil
			}
			rep.Resources[i].Child = child
			return nil
		})
	}
	_ = g.Wait()
	var ids []string
	for i := range rep.Resources {
		child := rep.Resources[i].Child
		if child == nil {
			continue
		}
		if !child.Status.Final() || !finalTree(child) {
			rep.Resources[i].Child = nil // read from its own record, as it goes on
			continue
		}
		ids = appendTree(ids, child)
	}
	return ids
}

// finalTree reports whether every run under rep (nested) has ended.
func finalTree(rep *Report) bool {
	for _, res := range rep.Resources {
		if res.Child != nil && (!res.Child.Status.Final() || !finalTree(res.Child)) {
			return false
		}
	}
	return true
}

// appendTree appends the run IDs of rep and of the runs nested in it.
func appendTree(ids []string, rep *Report) []string {
	ids = append(ids, rep.RunID)
	for _, res := range rep.Resources {
		if res.Child != nil {
			ids = appendTree(ids, res.Child)
		}
	}
	return ids
}

// purgeFolded removes, in the background, what the folded runs left on
// the bus: records and reports at once; a root fan-out's whole tree's
// events in one purge once no follower is behind on them (purgeTree);
// the delete markers of active marks (and a nested fan-out's children's
// events) after FoldEventsGrace. A coordinator stopping meanwhile leaves
// the rest (events expire with the events stream's max age; a record and
// a report left stay readable).
func (r *run) purgeFolded(ctx context.Context, ids []string) {
	if len(ids) == 0 {
		return
	}
	c, root, log := r.c, rootOf(r.rec), r.log
	ended := time.Now()
	c.wg.Go(func() {
		purgeAll(ctx, ids, func(ctx context.Context, id string) error {
			if err := c.bus.PurgeReport(ctx, id); err != nil {
				return err
			}
			return c.bus.PurgeKey(ctx, c.bus.Runs(), runKey(id))
		}, log)
		if root == r.rec.RunID {
			// The fan-out is its tree's root: the tree's events, its own
			// included, in one purge. A purge by subject walks every
			// message of the stream between the subject's first and last
			// one, and a child's events span its fan-out's: purged child by
			// child, a fan-out of N hosts cost N walks over N hosts'
			// events (38 % of the server's CPU at 1,000 hosts, growing
			// with the square of the hosts).
			if !c.purgeTree(ctx, root, ended, log) {
				return
			}
		}
		t := time.NewTimer(time.Until(ended.Add(c.cfg.FoldEventsGrace)))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// The delete markers of the children's active marks, after the
		// grace: a child removes its mark (deactivate) after its
		// outcome reached the fan-out, and a purge at the fold came
		// before the last children's markers (188 of 1,000 left in the
		// runs bucket by one fan-out, for ever).
		purgeAll(ctx, ids, func(ctx context.Context, id string) error {
			if root != r.rec.RunID {
				if err := c.bus.PurgeEvents(ctx, root, id); err != nil {
					return err
				}
			}
			return c.bus.PurgeKey(ctx, c.bus.Runs(), activeKey(id))
		}, log)
	})
}

// purgeTree purges the events of the run tree root, a fan-out that ended
// at ended, once no consumer of the events stream has some of them left
// to be sent: looked at from FoldEventsSettle after ended, every
// FoldEventsSettle (at most every second), and purged FoldEventsGrace
// after ended whatever the readers (as when they cannot be listed). It
// reports false when ctx ended first.
//
// Kept the whole grace (30 s), a fleet's runs 2.5 s apart held twelve
// runs' events (at 1,000 hosts, 45 events of ~450 bytes a host and run:
// 240 MB on disk, 60,000 subjects), and the purge walked blocks written
// half a minute before, which the file store loaded again into buffers
// it keeps 10 s: most of the server's heap over consecutive fleet runs
// (docs/fleet-scale.md, memory over 100 runs).
func (c *Coordinator) purgeTree(ctx context.Context, root string, ended time.Time, log interface {
	Warn(string, ...any)
}) bool {
	grace, settle := c.cfg.FoldEventsGrace, c.cfg.FoldEventsSettle
	poll := min(settle, time.Second)
	t := time.NewTimer(time.Until(ended.Add(settle)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		left := time.Until(ended.Add(grace))
		if left > 0 {
			n, err := c.bus.TreeEventReaders(ctx, root)
			if err != nil || n > 0 {
				// Behind, or not known: look again, or wait out the grace.
				wait := left
				if err == nil {
					wait = min(poll, left)
				}
				t.Reset(wait)
				continue
			}
		}
		if err := c.bus.PurgeTreeEvents(ctx, root); err != nil && ctx.Err() == nil {
			log.Warn("events of the folded fan-out not purged (they expire with the stream's max age)", "error", err)
		}
		return ctx.Err() == nil
	}
}

// purgeAll calls purge for each id, childReportReads at a time, and logs
// the first failure.
func purgeAll(ctx context.Context, ids []string, purge func(context.Context, string) error, log interface {
	Warn(string, ...any)
}) {
	var g errgroup.Group
	g.SetLimit(childReportReads)
	for _, id := range ids {
		g.Go(func() error { return purge(ctx, id) })
	}
	if err := g.Wait(); err != nil && ctx.Err() == nil {
		log.Warn("folded child runs not all purged", "runs", len(ids), "error", err)
	}
}

// foldedReport finds the report of runID, a child run whose record was
// purged, in the report its parent (or an ancestor, up levels above)
// folded it into. It returns an error wrapping bus.ErrNotFound when runID
// is not a child run ID or no ancestor holds it.
func foldedReport(ctx context.Context, b *bus.Bus, runID string, up int) (*Report, error) {
	parent := parentRunID(runID)
	if parent == "" || up >= maxReportDepth {
		return nil, bus.ErrNotFound
	}
	var prep *Report
	rec, _, err := loadRecord(ctx, b.Runs(), parent)
	switch {
	case err == nil:
		prep, err = runReport(ctx, b, rec)
	case errors.Is(err, bus.ErrNotFound):
		prep, err = foldedReport(ctx, b, parent, up+1)
	}
	if err != nil {
		return nil, err
	}
	for _, res := range prep.Resources {
		if res.ChildRunID == runID && res.Child != nil {
			return res.Child, nil
		}
	}
	return nil, bus.ErrNotFound
}

// parentRunID is the parent's run ID in a child run ID made by
// childRunID (<parent>-a<task>[r<attempt>]), or "" for any other (a root
// run's, or a child's whose ID was too long and was hashed).
func parentRunID(id string) string {
	k := strings.LastIndex(id, "-a")
	if k <= 0 {
		return ""
	}
	digits, retry := id[k+2:], false
	if j := strings.IndexByte(digits, 'r'); j >= 0 {
		if !allDigits(digits[j+1:]) {
			return ""
		}
		digits, retry = digits[:j], true
	}
	if !allDigits(digits) || retry && digits == "" {
		return ""
	}
	return id[:k]
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
