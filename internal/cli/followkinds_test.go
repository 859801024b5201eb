package cli

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
)

// TestFollowedKinds: the event kinds an embedded apply's coordinator is
// told its follower reads (followedKinds) are those followRun follows:
// the root run's end with --output json, finished resources and the end
// without a terminal, every event (nil) with a live status line.
func TestFollowedKinds(t *testing.T) {
	tty, err := os.Open(os.DevNull) // a character device, as a terminal is
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	env := func(string) string { return "" }
	for _, c := range []struct {
		name string
		st   IO
		o    followOpts
		want []bus.EventKind
	}{
		{"json", IO{Stdout: tty, Getenv: env}, followOpts{output: "json"}, []bus.EventKind{bus.EventRunRejected, bus.EventRunFinished}},
		{"text, not a terminal", IO{Stdout: &strings.Builder{}, Getenv: env}, followOpts{output: "text"}, printedKinds},
		{"text, a terminal", IO{Stdout: tty, Getenv: env}, followOpts{output: "text"}, nil},
	} {
		got := followedKinds(c.st, c.o)
		if !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if p := newProgressPrinter(c.st, c.o); !slices.Equal(p.kinds(), got) {
			t.Errorf("%s: followRun follows %v, the coordinator is told %v", c.name, p.kinds(), got)
		}
	}
}
