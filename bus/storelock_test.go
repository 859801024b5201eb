package bus_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
)

// TestStoreDirLocked: a second server on the store directory of a live one
// is refused, naming the holder's pid; once the first is shut down the
// directory is free again.
func TestStoreDirLocked(t *testing.T) {
	dir := t.TempDir()
	s1, err := bus.StartServer(bus.ServerConfig{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bus.StartServer(bus.ServerConfig{StoreDir: dir})
	if !errors.Is(err, bus.ErrStoreInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second server: %v", err)
	}
	if bus.StoreAbandoned(dir) {
		t.Fatal("a live server's store reported abandoned")
	}
	s1.Shutdown()
	s2, err := bus.StartServer(bus.ServerConfig{StoreDir: dir})
	if err != nil {
		t.Fatalf("after shutdown: %v", err)
	}
	s2.Shutdown()
}
