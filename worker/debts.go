package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/document"
)

// DefaultDebtDir is where a host's refresh debts are kept:
// refresh-debts beside the last-applied documents (under
// $MANIFOLD_STATE_DIR, else /var/lib/manifold for root, else
// $XDG_STATE_HOME/manifold).
func DefaultDebtDir() string {
	return filepath.Join(filepath.Dir(document.DefaultStateDir()), "refresh-debts")
}

// debt is a refresh owed to a resource of this host: a resource it
// subscribes to changed, and the refresh has not yet run to success (the
// subscriber failed or was skipped, or the process died in between).
type debt struct {
	// Manifest and Ref name the subscriber.
	Manifest string `json:"manifest"`
	Ref      string `json:"ref"`
	// Cause is the resource whose change is owed, in RunID, at Since.
	Cause string    `json:"cause"`
	RunID string    `json:"run_id"`
	Since time.Time `json:"since"`
}

// debts are the refreshes this host owes, durable in a directory (one
// file per subscriber, written atomically and synced) and indexed in
// memory: a task's lookup costs no I/O. A debt is recorded when a resource
// with subscribers changes — before its outcome is published, so a crash
// after the change cannot lose it — and paid when the subscriber next runs
// to success (not failed, not skipped, not in noop); until then every run
// of the subscriber, in any later run of the same manifest, refreshes it.
type debts struct {
	store *resources.FileState // nil: in memory only
	mu    sync.Mutex
	owed  map[string]debt // by key
}

// openDebts loads the debts kept in dir; an empty dir keeps them in
// memory only.
func openDebts(dir string) (*debts, error) {
	d := &debts{owed: map[string]debt{}}
	if dir == "" {
		return d, nil
	}
	st, err := resources.NewFileState(dir)
	if err != nil {
		return nil, fmt.Errorf("refresh debts: %w", err)
	}
	d.store = st
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("refresh debts: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var v debt
		if json.Unmarshal(b, &v) != nil || v.Ref == "" {
			continue
		}
		d.owed[debtKey(v.Manifest, v.Ref)] = v
	}
	return d, nil
}

func debtKey(manifest, ref string) string { return "refresh\x00" + manifest + "\x00" + ref }

// owes returns the debt of task's resource, if any.
func (d *debts) owes(task bus.Task) (debt, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.owed) == 0 {
		return debt{}, false // nearly always: no key made for every resource
	}
	v, ok := d.owed[debtKey(task.Manifest, task.Resource.Ref())]
	return v, ok
}

// none reports whether no refresh is owed at all.
func (d *debts) none() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.owed) == 0
}

// settle records what task's outcome o means for the debts: its
// subscribers are owed a refresh when it changed; its own debt is paid
// when it ran to success. Noop runs neither owe nor pay.
func (d *debts) settle(ctx context.Context, task bus.Task, o bus.Outcome) error {
	if task.Noop || task.HealthCheckOnly {
		return nil
	}
	if (o.Status != bus.TaskChanged || len(task.Subscribers) == 0) && d.none() {
		return nil // nothing to owe, nothing to pay
	}
	ref := task.Resource.Ref()
	if o.Status == bus.TaskChanged {
		for _, sub := range task.Subscribers {
			if err := d.put(ctx, debt{Manifest: task.Manifest, Ref: sub, Cause: ref, RunID: task.RunID, Since: time.Now().UTC()}); err != nil {
				return err
			}
		}
	}
	if o.Status == bus.TaskChanged || o.Status == bus.TaskStable {
		return d.pay(ctx, task.Manifest, ref)
	}
	return nil
}

func (d *debts) put(ctx context.Context, v debt) error {
	key := debtKey(v.Manifest, v.Ref)
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.owed[key]; ok {
		v = old // the oldest debt says since when it is owed
	}
	if d.store != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := d.store.Put(ctx, key, b); err != nil {
			return fmt.Errorf("refresh debt of %s: %w", v.Ref, err)
		}
	}
	d.owed[key] = v
	return nil
}

func (d *debts) pay(ctx context.Context, manifest, ref string) error {
	key := debtKey(manifest, ref)
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.owed[key]; !ok {
		return nil
	}
	if d.store != nil {
		if err := d.store.Delete(ctx, key); err != nil {
			return fmt.Errorf("refresh debt of %s: %w", ref, err)
		}
	}
	delete(d.owed, key)
	return nil
}
