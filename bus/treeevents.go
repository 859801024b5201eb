package bus

import "context"

// PurgeTreeEvents removes every progress event of the run tree rootRunID
// (EventsOfRun) from the events stream with one purge by subject, leaving
// no marker. One purge walks the stream's messages between the tree's
// first and last event once; a purge per run of the tree (PurgeEvents)
// walks that span again for each run whose events are spread over it,
// as a fan-out's children's are.
func (b *Bus) PurgeTreeEvents(ctx context.Context, rootRunID string) error {
	return b.purgeSubject(ctx, StreamEvents, EventsOfRun(rootRunID))
}
