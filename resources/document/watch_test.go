package document_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/document"
)

// TestKVDocumentWatchRepairs: a kv:// document watched through a KV watch
// (real embedded server) is repaired when its entry is changed by hand,
// by a drift run of that resource alone.
func TestKVDocumentWatchRepairs(t *testing.T) {
	t.Parallel()
	k := setupKV(t)
	const ref = "document#kv://apps/web.config"
	if o := k.run(t, k.buckets(nil), `{"port": 80}`); o.Err != nil || !o.Changed {
		t.Fatalf("first apply: %+v", o)
	}
	res, err := document.NewFactory(document.Config{Buckets: k.buckets(nil)})(resources.Spec{
		Type: document.Type, Name: "kv://apps/web.config", Properties: map[string]any{"content": map[string]any{"port": 80}}})
	if err != nil {
		t.Fatal(err)
	}
	hints := make(chan converge.Hint, 16)
	kw := converge.NewKVWatcher(k.bus, hints)
	defer kw.Close()
	if err := kw.Set(ref, res.(resources.Watcher).WatchTargets()); err != nil {
		t.Fatal(err)
	}
	if kw.Entries() != 1 {
		t.Fatalf("%d entries watched, want 1", kw.Entries())
	}

	repaired := make(chan converge.Trigger, 16)
	runner := converge.RunnerFunc(func(ctx context.Context, tr converge.Trigger) (converge.RunResult, error) {
		o := resources.Execute(ctx, res, &resources.Env{State: k.store})
		if o.Err != nil {
			return converge.RunResult{Failed: tr.Keys}, nil
		}
		if o.Changed {
			repaired <- tr
			return converge.RunResult{Changed: tr.Keys}, nil
		}
		return converge.RunResult{Stable: tr.Keys}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- converge.Loop(ctx, converge.LoopConfig{SkipStart: true, Interval: time.Hour}, runner, hints)
	}()
	defer func() { cancel(); <-done }()

	// The hand edit.
	_, rev, _, err := k.entry.Get(ctx, "web.config")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := k.entry.Update(ctx, "web.config", []byte(`{"port": 9999}`), rev); err != nil || !ok {
		t.Fatalf("hand edit: %v %v", ok, err)
	}
	select {
	case tr := <-repaired:
		if tr.Kind != converge.TriggerDrift || len(tr.Keys) != 1 || tr.Keys[0] != ref {
			t.Fatalf("trigger %+v, want a drift repair of %s", tr, ref)
		}
		if why := tr.Why[ref]; !strings.HasPrefix(why, "kv put apps/web.config rev ") {
			t.Fatalf("why %q", why)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hand edit was not repaired within 10s")
	}
	if got, want := k.value(t), map[string]any{"port": json.Number("80")}; !reflect.DeepEqual(normalise(got), normalise(want)) {
		t.Fatalf("entry after the repair: %v, want %v", got, want)
	}
	kw.Remove(ref)
	if kw.Entries() != 0 {
		t.Fatalf("%d entries watched after Remove, want 0", kw.Entries())
	}
}

// normalise makes numbers comparable across decoders.
func normalise(v any) string { b, _ := json.Marshal(v); return string(b) }
