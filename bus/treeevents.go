package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// PurgeTreeEvents removes every progress event of the run tree rootRunID
// (EventsOfRun) from the events stream with one purge by subject, leaving
// no marker. One purge walks the stream's messages between the tree's
// first and last event once; a purge per run of the tree (PurgeEvents)
// walks that span again for each run whose events are spread over it,
// as a fan-out's children's are.
func (b *Bus) PurgeTreeEvents(ctx context.Context, rootRunID string) error {
	return b.purgeSubject(ctx, StreamEvents, EventsOfRun(rootRunID))
}

// TreeEventReaders returns how many consumers of the events stream read
// events of the run tree rootRunID (a filter of theirs matches some of
// its subjects) and still have messages to be sent (num_pending): the
// followers (`manifold run --follow`, a `nats` consumer) that would lose
// events were the tree's purged now. Consumers that read nothing of the
// tree, and those that have been sent all of it, are not counted.
// It lists the stream's consumers (`CONSUMER.LIST`, 256 a page).
func (b *Bus) TreeEventReaders(ctx context.Context, rootRunID string) (int, error) {
	tree := EventsOfRun(rootRunID)
	n := 0
	for offset := 0; ; {
		req, _ := json.Marshal(struct {
			Offset int `json:"offset"`
		}{offset})
		msg, err := b.nc.RequestWithContext(ctx, b.apiPrefix()+"CONSUMER.LIST."+StreamEvents, req)
		if err != nil {
			return 0, fmt.Errorf("bus: consumers of %s: %w", StreamEvents, err)
		}
		var resp struct {
			Total     int                       `json:"total"`
			Consumers []*jetstream.ConsumerInfo `json:"consumers"`
			Error     *struct {
				Code        int    `json:"err_code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil {
			return 0, fmt.Errorf("bus: consumers of %s: unreadable reply: %w", StreamEvents, err)
		}
		if resp.Error != nil {
			return 0, fmt.Errorf("bus: consumers of %s: %s (%d)", StreamEvents, resp.Error.Description, resp.Error.Code)
		}
		for _, ci := range resp.Consumers {
			if ci != nil && ci.NumPending > 0 && readsSubjects(ci.Config, tree) {
				n++
			}
		}
		offset += len(resp.Consumers)
		if len(resp.Consumers) == 0 || offset >= resp.Total {
			return n, nil
		}
	}
}

// readsSubjects reports whether a consumer of cfg may be sent messages
// on subjects of filter: one of its filters overlaps it (no filter: the
// whole stream).
func readsSubjects(cfg jetstream.ConsumerConfig, filter string) bool {
	filters := cfg.FilterSubjects
	if cfg.FilterSubject != "" {
		filters = append(filters, cfg.FilterSubject)
	}
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if subjectsOverlap(f, filter) {
			return true
		}
	}
	return false
}

// subjectsOverlap reports whether some subject matches both NATS subject
// filters a and b ('*' one token, '>' one or more at the end).
func subjectsOverlap(a, b string) bool {
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(ta) && i == len(tb):
			return true
		case i == len(ta) || i == len(tb):
			// One ran out: only a '>' left on the other matches more
			// tokens, and it needs one, which the shorter has not.
			return false
		case ta[i] == ">" || tb[i] == ">":
			return true
		case ta[i] != "*" && tb[i] != "*" && ta[i] != tb[i]:
			return false
		}
	}
}
