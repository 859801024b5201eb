package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// embeddedStopWait bounds stopping the embedded engine after a run: a
// coordinator still winding down child runs is left behind (the process
// exits; the next apply removes its store).
const embeddedStopWait = 5 * time.Second

// exit ends the process; tests replace it.
var exit = os.Exit

// exitOnSecondSignal makes the second SIGINT or SIGTERM received while it
// is armed end the process at once with ExitUnavailable (the first one
// cancels the command's context, through main's signal.NotifyContext, and
// the command winds down within its bounds). The returned func disarms it.
func exitOnSecondSignal(st IO, cmd string) (disarm func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if n++; n >= 2 {
					fmt.Fprintf(st.Stderr, "manifold %s: second %s: exiting now\n", cmd, sig)
					exit(ExitUnavailable)
					return
				}
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// closeWithin stops the embedded engine, giving up after d; when the
// process exits next (st.ProcessExits), the exit ends the server
// (closeBeforeExit).
func (e *embedded) closeWithin(st IO, d time.Duration) {
	done := make(chan struct{})
	go func() {
		if st.ProcessExits {
			e.closeBeforeExit()
		} else {
			e.close()
		}
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		fmt.Fprintf(st.Stderr, "manifold apply: the embedded engine did not stop within %s; exiting without it\n", d)
	}
}
