package resources

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scenario builds fresh fakes and their envs.
type scenario struct {
	name  string
	build func() ([]*fake, []Env)
}

func checkAllScenarios() []scenario {
	many := func(n int, set func(i int, f *fake, e *Env)) func() ([]*fake, []Env) {
		return func() ([]*fake, []Env) {
			fs, es := make([]*fake, n), make([]Env, n)
			for i := range fs {
				fs[i] = &fake{converged: true}
				set(i, fs[i], &es[i])
			}
			return fs, es
		}
	}
	return []scenario{
		{"converged", many(40, func(int, *fake, *Env) {})},
		{"three drifted", many(40, func(i int, f *fake, _ *Env) { f.converged = i != 3 && i != 17 && i != 31 })},
		{"a failed check closes the batch", many(40, func(i int, f *fake, _ *Env) {
			f.converged = i%5 != 0
			if i == 25 {
				f.checkErr = errors.New("parent directory /x does not exist")
			}
		})},
		{"a refreshed member runs alone", many(40, func(i int, f *fake, e *Env) {
			f.converged = i%7 != 0
			if i == 30 {
				f.refreshable, e.Refresh = true, true
			}
		})},
		{"noop", many(40, func(i int, f *fake, e *Env) { f.converged, e.Noop = i%3 != 0, true })},
		{"a panic", many(40, func(i int, f *fake, _ *Env) { f.converged, f.panics = i != 9, i == 12 })},
		{"health-check-only", many(20, func(i int, _ *fake, e *Env) { e.HealthCheckOnly = true })},
	}
}

// runCheckAll is runBatch through Precheck and AddChecked (the checks of
// a segment run ahead, side by side), the fakes concurrent.
func runCheckAll(t *testing.T, tx *transactions, fakes []*fake, envs []Env, parallel int) []Outcome {
	t.Helper()
	ctx := context.Background()
	items := make([]BatchItem, len(fakes))
	for i, f := range fakes {
		items[i] = BatchItem{Ctx: ctx, Res: batched{fake: f, tx: tx, concurrent: true}, Env: &envs[i]}
	}
	var b Batch
	b.AddChecked(items, Precheck(items, parallel))
	_ = b.Apply(ctx)
	outs := make([]Outcome, len(fakes))
	for i := range fakes {
		outs[i] = b.Finish(ctx, i)
	}
	return outs
}

// Precheck and AddChecked give each member the outcome, and the batch the applies, that
// Check one member after the other gives.
func TestCheckAllIsCheckOneByOne(t *testing.T) {
	for _, sc := range checkAllScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			f1, e1 := sc.build()
			tx1 := &transactions{}
			want, _ := runBatch(t, tx1, f1, e1...)
			f2, e2 := sc.build()
			tx2 := &transactions{}
			got := runCheckAll(t, tx2, f2, e2, 4)
			require.Equal(t, statuses(want), statuses(got))
			for i := range want {
				require.Equal(t, want[i].Message, got[i].Message, "member %d", i)
				require.Equal(t, want[i].Noop, got[i].Noop, "member %d", i)
				require.Equal(t, f1[i].applies, f2[i].applies, "applies of member %d", i)
				if f1[i].checks != f2[i].checks {
					// Checked ahead for nothing: only after the
					// batch closed, executed alone and checked again.
					require.Equal(t, f1[i].checks+1, f2[i].checks, "checks of member %d", i)
				}
			}
			require.Equal(t, len(tx1.calls), len(tx2.calls))
		})
	}
}

// gated is a concurrent Batcher whose checks wait until two are in
// flight: a batch checked one by one never gets there.
type gated struct {
	fake
	inFlight, most *atomic.Int32
	two            chan struct{}
	once           *sync.Once
}

func (g *gated) ConcurrentCheck() bool                          { return true }
func (g *gated) BatchKey(context.Context, *Env) (string, error) { return "gated", nil }
func (g *gated) ApplyBatch(context.Context, *Env, []Batcher) ([]Result, error) {
	return nil, errors.New("nothing to apply")
}

func (g *gated) CheckApply(ctx context.Context, env *Env, apply bool) (Result, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	if n >= 2 {
		g.once.Do(func() { close(g.two) })
	}
	select {
	case <-g.two:
	case <-time.After(5 * time.Second):
		return Result{}, errors.New("no other check ran beside this one")
	}
	return Result{Message: "in sync"}, nil
}

// Precheck runs the checks of a segment side by side.
func TestCheckAllChecksSideBySide(t *testing.T) {
	var inFlight, most atomic.Int32
	two, once := make(chan struct{}), &sync.Once{}
	items := make([]BatchItem, 32)
	for i := range items {
		items[i] = BatchItem{Ctx: context.Background(), Res: &gated{inFlight: &inFlight, most: &most, two: two, once: once}}
	}
	var b Batch
	b.AddChecked(items, Precheck(items, 2))
	for i := range items {
		require.Equal(t, StatusStable, b.Finish(context.Background(), i).Status, "member %d", i)
	}
	require.GreaterOrEqual(t, most.Load(), int32(2))
	require.LessOrEqual(t, most.Load(), int32(2), "at most parallel checks at once")
}

// A member with something to apply finished before Apply (the worker
// applies a lone change as it meets it) is applied alone, leaves Pending
// and is left out of Apply, which applies the others together.
func TestMemberFinishedBeforeApplyIsLeftOutOfIt(t *testing.T) {
	ctx := context.Background()
	tx := &transactions{}
	fakes := []*fake{{converged: true}, {}, {converged: true}, {}, {}}
	items := make([]BatchItem, len(fakes))
	for i, f := range fakes {
		items[i] = BatchItem{Ctx: ctx, Res: batched{fake: f, tx: tx, concurrent: true}, Env: &Env{}}
	}
	var b Batch
	b.AddChecked(items[:2], Precheck(items[:2], 2))
	require.Equal(t, 1, b.Pending())
	require.True(t, b.Decided(0))
	require.False(t, b.Decided(1))
	require.Equal(t, StatusStable, b.Finish(ctx, 0).Status)
	require.Equal(t, StatusChanged, b.Finish(ctx, 1).Status, "applied alone")
	require.Zero(t, b.Pending())
	require.Equal(t, 1, fakes[1].applies)

	b.AddChecked(items[2:], Precheck(items[2:], 2))
	require.Equal(t, 2, b.Pending())
	require.NoError(t, b.Apply(ctx))
	require.Len(t, tx.calls, 1)
	require.Equal(t, []*fake{fakes[3], fakes[4]}, tx.calls[0], "the member finished before is left out")
	for i := 2; i < len(fakes); i++ {
		b.Finish(ctx, i)
	}
	require.Zero(t, b.Pending())
	require.Equal(t, 1, fakes[1].applies, "never applied twice")
}
