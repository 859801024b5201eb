package bus

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// SubscribeCancels calls fn with the run ID of every run cancellation
// announced on CancelSubject, until the returned stop is called. These are
// core-NATS messages: a process that is not connected when a run is
// cancelled misses it (the run record still says cancelled, and outcomes
// of its tasks are dropped).
func (b *Bus) SubscribeCancels(fn func(runID string)) (stop func(), err error) {
	sub, err := b.nc.Subscribe(SubjectControlPrefix+".*.cancel", func(m *nats.Msg) {
		rest := strings.TrimPrefix(m.Subject, SubjectControlPrefix+".")
		if id, ok := strings.CutSuffix(rest, ".cancel"); ok {
			fn(id)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("bus: subscribe to cancellations: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
