package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
