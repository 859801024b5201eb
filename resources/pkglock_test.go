package resources

import (
	"context"
	"errors"
	"testing"
)

func TestLockPackageManager(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	unlock, err := LockPackageManager(ctx, "test-mgr-a")
	if err != nil {
		t.Fatal(err)
	}

	// Another manager's lock is independent.
	other, err := LockPackageManager(ctx, "test-mgr-b")
	if err != nil {
		t.Fatal(err)
	}
	other()

	// A second taker of the same manager waits until it is cancelled.
	cause := errors.New("gave up")
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(cause)
	if _, err := LockPackageManager(cctx, "test-mgr-a"); !errors.Is(err, cause) {
		t.Fatalf("locked twice or wrong error: %v", err)
	}

	// A waiter gets the lock once it is released.
	got := make(chan func())
	go func() {
		u, err := LockPackageManager(ctx, "test-mgr-a")
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- u
	}()
	unlock()
	unlock() // idempotent: must not release the waiter's hold
	u2 := <-got
	if u2 == nil {
		t.FailNow()
	}
	cctx2, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, err := LockPackageManager(cctx2, "test-mgr-a"); err == nil {
		t.Fatal("a second unlock released another holder's lock")
	}
	u2()
}
