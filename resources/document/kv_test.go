package document_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/document"
	"github.com/manifold-run/manifold/resources/merge"
)

type kvBundle struct {
	srv   *bus.Server
	bus   *bus.Bus
	entry *bus.DocumentKV // the bucket "apps", for the other writer
	store *document.FileStore
}

func setupKV(t *testing.T) *kvBundle {
	t.Helper()
	srv, b := bustest.Start(t, bus.Config{})
	entry, err := b.EnsureDocumentBucket(context.Background(), "apps")
	if err != nil {
		t.Fatal(err)
	}
	return &kvBundle{srv: srv, bus: b, entry: entry, store: &document.FileStore{Dir: t.TempDir(), Host: "h"}}
}

// buckets opens buckets through the bus, each opened KV wrapped by wrap.
func (k *kvBundle) buckets(wrap func(document.KV) document.KV) document.Buckets {
	return document.BucketsFunc(func(ctx context.Context, name string) (document.KV, error) {
		kv, err := k.bus.DocumentKV(ctx, name)
		if err != nil {
			return nil, err
		}
		if wrap != nil {
			return wrap(kv), nil
		}
		return kv, nil
	})
}

func (k *kvBundle) run(t *testing.T, b document.Buckets, content string) resources.Outcome {
	t.Helper()
	var c any
	if err := json.Unmarshal([]byte(content), &c); err != nil {
		t.Fatal(err)
	}
	res, err := document.NewFactory(document.Config{Buckets: b})(resources.Spec{
		Type: document.Type, Name: "kv://apps/web.config", Properties: map[string]any{"content": c}})
	if err != nil {
		t.Fatal(err)
	}
	return resources.Execute(context.Background(), res, &resources.Env{State: k.store})
}

func (k *kvBundle) value(t *testing.T) any {
	t.Helper()
	raw, _, found, err := k.entry.Get(context.Background(), "web.config")
	if err != nil || !found {
		t.Fatalf("get: found %v, %v", found, err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("entry %q: %v", raw, err)
	}
	return v
}

// otherWriter adds field=value to the entry with its own compare-and-swap
// loop, as a well-behaved concurrent writer does.
func (k *kvBundle) otherWriter(ctx context.Context, field string, value any) error {
	for {
		raw, rev, found, err := k.entry.Get(ctx, "web.config")
		if err != nil {
			return err
		}
		doc := map[string]any{}
		if found {
			if err := json.Unmarshal(raw, &doc); err != nil {
				return err
			}
		}
		doc[field] = value
		out, _ := json.Marshal(doc)
		var ok bool
		if found {
			_, ok, err = k.entry.Update(ctx, "web.config", out, rev)
		} else {
			_, ok, err = k.entry.Create(ctx, "web.config", out)
		}
		if err != nil || ok {
			return err
		}
	}
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestKVLifecycle(t *testing.T) {
	t.Parallel()
	k := setupKV(t)
	b := k.buckets(nil)
	out := k.run(t, b, `{"replicas": 2, "env": {"MODE": "prod", "DEBUG": "0"}}`)
	if out.Status != resources.StatusChanged || out.Message != "created" {
		t.Fatalf("first apply %+v", out)
	}
	if out := k.run(t, b, `{"replicas": 2, "env": {"MODE": "prod", "DEBUG": "0"}}`); out.Status != resources.StatusStable {
		t.Fatalf("second apply %+v", out)
	}
	if err := k.otherWriter(context.Background(), "scaler", "auto"); err != nil {
		t.Fatal(err)
	}
	out = k.run(t, b, `{"replicas": 3, "env": {"MODE": "prod"}}`)
	if out.Status != resources.StatusChanged || out.Message != "updated 2 fields" {
		t.Fatalf("update %+v", out)
	}
	if got := k.value(t); !merge.Equal(got, mustJSON(t, `{"replicas": 3, "env": {"MODE": "prod"}, "scaler": "auto"}`)) {
		t.Fatalf("entry %v", got)
	}
}

// racingKV makes the other writer change the entry right after each of
// the resource's first `races` reads, so its compare-and-swap loses.
type racingKV struct {
	document.KV
	k     *kvBundle
	races int
	gets  int
}

func (r *racingKV) Get(ctx context.Context, key string) ([]byte, uint64, bool, error) {
	v, rev, found, err := r.KV.Get(ctx, key)
	r.gets++
	if r.gets <= r.races {
		if err := r.k.otherWriter(ctx, fmt.Sprintf("race%d", r.gets), r.gets); err != nil {
			return nil, 0, false, err
		}
	}
	return v, rev, found, err
}

func TestKVRetriesLostCompareAndSwap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		races  int
		wantOK bool
	}{
		{"one lost race", 1, true},
		{"at the limit", document.MaxCASAttempts - 1, true},
		{"past the limit", document.MaxCASAttempts, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := setupKV(t)
			if err := k.otherWriter(context.Background(), "seed", true); err != nil {
				t.Fatal(err)
			}
			var racer *racingKV
			b := k.buckets(func(kv document.KV) document.KV {
				racer = &racingKV{KV: kv, k: k, races: tc.races}
				return racer
			})
			out := k.run(t, b, `{"ours": 1}`)
			if !tc.wantOK {
				if !errors.Is(out.Err, document.ErrConflict) || !strings.Contains(out.Err.Error(), "kv://apps/web.config") {
					t.Fatalf("err %v, want ErrConflict naming the entry", out.Err)
				}
				if racer.gets != document.MaxCASAttempts {
					t.Fatalf("%d reads, want %d", racer.gets, document.MaxCASAttempts)
				}
				if got := k.value(t).(map[string]any); got["ours"] != nil {
					t.Fatalf("a conflicting apply wrote: %v", got)
				}
				return
			}
			if out.Status != resources.StatusChanged {
				t.Fatalf("outcome %+v", out)
			}
			got := k.value(t).(map[string]any)
			if got["ours"] != 1.0 || got["seed"] != true {
				t.Fatalf("entry %v", got)
			}
			for i := 1; i <= tc.races; i++ {
				if got[fmt.Sprintf("race%d", i)] == nil {
					t.Fatalf("the other writer's race%d was overwritten: %v", i, got)
				}
			}
		})
	}
}

func TestKVConcurrentWriter(t *testing.T) {
	t.Parallel()
	k := setupKV(t)
	b := k.buckets(nil)
	const writes = 40
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(1)
	errs := make(chan error, 1)
	go func() {
		defer wg.Done()
		for i := range writes {
			if err := k.otherWriter(ctx, fmt.Sprintf("w%02d", i), i); err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := range 10 {
		out := k.run(t, b, fmt.Sprintf(`{"ours": {"gen": %d}}`, i))
		if out.Status == resources.StatusFailed && !errors.Is(out.Err, document.ErrConflict) {
			t.Fatalf("apply %d: %v", i, out.Err)
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if out := k.run(t, b, `{"ours": {"gen": 10}}`); out.Status == resources.StatusFailed {
		t.Fatalf("final apply: %v", out.Err)
	}
	got := k.value(t).(map[string]any)
	for i := range writes {
		if _, ok := got[fmt.Sprintf("w%02d", i)]; !ok {
			t.Fatalf("the other writer's w%02d was lost: %v", i, got)
		}
	}
	if !merge.Equal(got["ours"], map[string]any{"gen": 10}) {
		t.Fatalf("ours = %v", got["ours"])
	}
}

func TestKVErrors(t *testing.T) {
	t.Parallel()
	k := setupKV(t)
	out := k.run(t, nil, `{"a": 1}`)
	if !errors.Is(out.Err, document.ErrNoBuckets) {
		t.Fatalf("no buckets: %v", out.Err)
	}
	res, err := document.NewFactory(document.Config{Buckets: k.buckets(nil)})(resources.Spec{
		Type: document.Type, Name: "kv://missing/key", Properties: map[string]any{"content": map[string]any{"a": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	out = resources.Execute(context.Background(), res, &resources.Env{State: k.store})
	if !errors.Is(out.Err, bus.ErrNotFound) || !strings.Contains(out.Err.Error(), "open bucket missing") {
		t.Fatalf("missing bucket: %v", out.Err)
	}
	// A corrupt entry is a failure and stays as it is.
	if _, _, err := k.entry.Create(context.Background(), "web.config", []byte("{oops")); err != nil {
		t.Fatal(err)
	}
	out = k.run(t, k.buckets(nil), `{"a": 1}`)
	var pe *document.ParseError
	if !errors.As(out.Err, &pe) || pe.File != "kv://apps/web.config" || pe.Line != 1 {
		t.Fatalf("corrupt entry: %v", out.Err)
	}
	if raw, _, _, _ := k.entry.Get(context.Background(), "web.config"); string(raw) != "{oops" {
		t.Fatalf("corrupt entry overwritten: %q", raw)
	}
}
