package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

func TestAssignmentsStoreVersionsAndWatch(t *testing.T) {
	t.Parallel()
	_, b := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	a := bus.Assignment{Name: "site", Bundle: "sha256-00", Pool: "web", Watch: true, CreatedAt: time.Now().UTC()}
	v1, err := b.PutAssignment(ctx, a)
	require.NoError(t, err)

	updates, err := b.WatchAssignments(ctx)
	require.NoError(t, err)
	next := func() bus.AssignmentUpdate {
		select {
		case u := <-updates:
			return u
		case <-ctx.Done():
			t.Fatal("no assignment update")
			return bus.AssignmentUpdate{}
		}
	}
	u := next()
	require.True(t, u.Initial)
	require.Equal(t, "site", u.Name)
	require.Equal(t, v1, u.Assignment.Version)
	require.Equal(t, "web", u.Assignment.Pool)
	require.True(t, next().Initial, "the marker ending the stored values")

	// A new version is seen at once, with a greater version.
	a.Pool = "db"
	v2, err := b.PutAssignment(ctx, a)
	require.NoError(t, err)
	require.Greater(t, v2, v1)
	u = next()
	require.False(t, u.Initial)
	require.Equal(t, v2, u.Assignment.Version)
	require.Equal(t, "db", u.Assignment.Pool)

	got, err := b.GetAssignment(ctx, "site")
	require.NoError(t, err)
	require.Equal(t, v2, got.Version)
	list, err := b.ListAssignments(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)

	// Removed: a nil assignment; removing again is ErrNotFound.
	require.NoError(t, b.DeleteAssignment(ctx, "site"))
	u = next()
	require.Equal(t, "site", u.Name)
	require.Nil(t, u.Assignment)
	require.True(t, errors.Is(b.DeleteAssignment(ctx, "site"), bus.ErrNotFound))
	list, err = b.ListAssignments(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestAssignmentValidation(t *testing.T) {
	t.Parallel()
	_, b := bustest.Start(t, bus.Config{})
	for _, c := range []struct {
		a    bus.Assignment
		want string
	}{
		{bus.Assignment{Name: "a.b", Bundle: "x", Pool: "web"}, "assignment name"},
		{bus.Assignment{Name: "a", Bundle: "x", Pool: "w*"}, "pool"},
		{bus.Assignment{Name: "a", Pool: "web"}, "no bundle"},
		{bus.Assignment{Name: "a", Bundle: "x", Pool: "web", IntervalMS: -1}, "negative"},
	} {
		_, err := b.PutAssignment(t.Context(), c.a)
		require.ErrorContains(t, err, c.want)
	}
}

// TestAssignmentsWatchFleet: 1,100 watches (past NATS's default of 1,000
// consumers per stream) on 11 connections each get the stored assignment,
// then its new version, and the server holds no consumer for them. With an
// ordered consumer per watch the 1,001st was refused (maximum consumers
// limit reached).
func TestAssignmentsWatchFleet(t *testing.T) {
	const watches, perConn = 1100, 100
	srv, b := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a := bus.Assignment{Name: "site", Bundle: "sha256-00", Pool: "web", Watch: true, CreatedAt: time.Now().UTC()}
	v1, err := b.PutAssignment(ctx, a)
	require.NoError(t, err)
	chans := make([]<-chan bus.AssignmentUpdate, watches)
	wb := b
	for i := range watches {
		if i%perConn == 0 && i > 0 {
			wb = bustest.Open(t, srv, bus.Config{})
		}
		chans[i], err = wb.WatchAssignments(ctx)
		require.NoError(t, err, "watch %d", i)
	}
	next := func(i int) bus.AssignmentUpdate {
		select {
		case u, ok := <-chans[i]:
			require.True(t, ok, "watch %d closed", i)
			return u
		case <-ctx.Done():
			t.Fatalf("watch %d: no update", i)
			return bus.AssignmentUpdate{}
		}
	}
	for i := range watches {
		u := next(i)
		require.True(t, u.Initial, "watch %d", i)
		require.Equal(t, v1, u.Assignment.Version, "watch %d", i)
		require.Equal(t, bus.AssignmentUpdate{Initial: true}, next(i), "watch %d: the marker", i)
	}
	info := streamInfo(t, b, "KV_"+bus.BucketAssignments)
	require.Zero(t, info.State.Consumers, "no consumer per watch")

	a.Pool = "db"
	v2, err := b.PutAssignment(ctx, a)
	require.NoError(t, err)
	for i := range watches {
		u := next(i)
		require.False(t, u.Initial, "watch %d", i)
		require.Equal(t, v2, u.Assignment.Version, "watch %d", i)
		require.Equal(t, "db", u.Assignment.Pool, "watch %d", i)
	}
	require.NoError(t, b.DeleteAssignment(ctx, "site"))
	for i := range watches {
		u := next(i)
		require.Equal(t, "site", u.Name, "watch %d", i)
		require.Nil(t, u.Assignment, "watch %d: removed", i)
	}
}

// TestAssignmentsWatchRacingChanges: watches started while assignments are
// written and deleted end with the stored state: a change made between
// the listing and the subscription, or heard before the stream stored
// it, is not missed.
func TestAssignmentsWatchRacingChanges(t *testing.T) {
	t.Parallel()
	_, b := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for round := range 30 {
		kept := bus.Assignment{Name: "kept", Bundle: "sha256-00", Pool: "web", CreatedAt: time.Now().UTC()}
		gone := bus.Assignment{Name: "gone", Bundle: "sha256-00", Pool: "web", CreatedAt: time.Now().UTC()}
		_, err := b.PutAssignment(ctx, gone)
		require.NoError(t, err)
		writes := make(chan uint64, 1)
		go func() {
			var last uint64
			for i := range 5 {
				kept.IntervalMS = int64(1000 * (i + 1))
				v, err := b.PutAssignment(ctx, kept)
				if err != nil {
					t.Error(err)
				}
				last = v
			}
			if err := b.DeleteAssignment(ctx, "gone"); err != nil {
				t.Error(err)
			}
			writes <- last
		}()
		wctx, stop := context.WithCancel(ctx)
		updates, err := b.WatchAssignments(wctx)
		require.NoError(t, err)
		state := map[string]uint64{}
		var final uint64
		for final == 0 || state["kept"] != final || state["gone"] != 0 {
			select {
			case u := <-updates:
				require.NoError(t, u.Err)
				switch {
				case u.Name == "":
				case u.Assignment == nil:
					delete(state, u.Name)
				default:
					require.Greater(t, u.Assignment.Version, state[u.Name], "round %d: versions only grow", round)
					state[u.Name] = u.Assignment.Version
				}
			case final = <-writes:
			case <-ctx.Done():
				t.Fatalf("round %d: the watch ended with %v, stored: kept at %d, gone deleted", round, state, final)
			}
		}
		stop()
		require.NoError(t, b.DeleteAssignment(ctx, "kept"))
	}
}

func streamInfo(t *testing.T, b *bus.Bus, name string) *jetstream.StreamInfo {
	t.Helper()
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	s, err := js.Stream(t.Context(), name)
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	return info
}
