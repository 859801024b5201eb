package bus

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reports are stored in the object store's own format (nats.go's
// ObjectStore and the nats CLI read them as before: chunks on
// $O.<bucket>.C.<nuid>, a description on $O.<bucket>.M.<name in
// base64url> that rolls its subject up), written by the bus instead of
// nats.go's Put. A fan-out writes one report per host and run, and Put
// made each cost the server more than the report: it looks the name up
// first (a direct get), and publishes through a JetStream context of
// its own whose reply subscription (_INBOX.<id>.*, a wildcard) it
// subscribes and unsubscribes around the put; the server walks its
// whole subject cache (1,024 entries) on each wildcard subscription and
// unsubscription. Here the chunks go through the bus's JetStream
// context, the description is published on condition that its subject
// holds nothing yet (one request; only when a report of that run is
// there already is its description read, to replace it and purge its
// chunks), and the chunk subject is remembered so that PurgeReport of a
// report put by this process needs no look-up either.

// reportChunkSize is the chunk size of stored reports: the object
// store's default (nats.go's Put).
const reportChunkSize = 128 << 10

// reportChunksInFlight bounds the chunks of one report published and not
// yet acknowledged (a 10,000-host fan-out's report is some 470 chunks).
const reportChunksInFlight = 64

// reportAckWait bounds the wait for one chunk's acknowledgement: the
// JetStream API's default timeout (nats.go's Put waits as long).
var reportAckWait = apiRequestWait

// apiRequestWait bounds a JetStream API request made under a context
// without a deadline: nats.go's default JetStream timeout.
const apiRequestWait = 5 * time.Second

// reportNUIDsMax bounds the chunk subjects remembered for PurgeReport:
// past it the memory is dropped, and a purge looks its report up.
const reportNUIDsMax = 1 << 16

// reportNUIDs remembers the chunk subject (nuid) of each report this
// process stored, until it is purged.
type reportNUIDs struct {
	mu sync.Mutex
	m  map[string]string
}

func (r *reportNUIDs) put(runID, nuid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= reportNUIDsMax {
		r.m = map[string]string{}
	}
	r.m[runID] = nuid
}

// take returns and forgets the nuid of runID's report.
func (r *reportNUIDs) take(runID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	nuid, ok := r.m[runID]
	delete(r.m, runID)
	return nuid, ok
}

// writeObject stores data as object name of bucket (stream OBJ_<bucket>) in
// the object store's format and returns the nuid of its chunks. An object
// of that name already there is replaced (its chunks purged).
func (b *Bus) writeObject(ctx context.Context, store jetstream.ObjectStore, bucket, name string, data []byte) (string, error) {
	nuid := rand.Text()
	chunks := "$O." + bucket + ".C." + nuid
	stream := "OBJ_" + bucket
	fail := func(err error) (string, error) {
		// The chunks stored so far go; a description was not written.
		_ = b.purgeSubject(context.WithoutCancel(ctx), stream, chunks)
		return "", err
	}
	var inFlight []jetstream.PubAckFuture
	// An acknowledgement that never comes (the stream's leader died with
	// the chunk) ends the put after reportAckWait, as nats.go's Put does
	// with its context's timeout: the caller's context may have no
	// deadline (a run's finish, which then leaves the run for recovery).
	timer := time.NewTimer(reportAckWait)
	defer timer.Stop()
	wait := func(f jetstream.PubAckFuture) error {
		timer.Reset(reportAckWait)
		select {
		case <-f.Ok():
			return nil
		case err := <-f.Err():
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("chunk not acknowledged within %s", reportAckWait)
		}
	}
	n := 0
	for off := 0; off < len(data); off += reportChunkSize {
		if len(inFlight) == reportChunksInFlight {
			if err := wait(inFlight[0]); err != nil {
				return fail(err)
			}
			inFlight = inFlight[1:]
		}
		f, err := b.js.PublishMsgAsync(&nats.Msg{Subject: chunks, Data: data[off:min(off+reportChunkSize, len(data))]})
		if err != nil {
			return fail(err)
		}
		inFlight = append(inFlight, f)
		n++
	}
	for _, f := range inFlight {
		if err := wait(f); err != nil {
			return fail(err)
		}
	}
	sum := sha256.Sum256(data)
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: reportChunkSize}},
		Bucket:     bucket, NUID: nuid, Size: uint64(len(data)), Chunks: uint32(n),
		Digest: "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:]),
	}
	meta, err := json.Marshal(info)
	if err != nil {
		return fail(err)
	}
	msg := &nats.Msg{Subject: "$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name)), Data: meta,
		Header: nats.Header{jetstream.MsgRollup: []string{jetstream.MsgRollupSubject}, jetstream.ExpectedLastSubjSeqHeader: []string{"0"}}}
	_, err = b.js.PublishMsg(ctx, msg)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		// Stored before (a run's report written again): replace it.
		old, gerr := store.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
		if gerr != nil && !errors.Is(gerr, jetstream.ErrObjectNotFound) {
			return fail(gerr)
		}
		msg.Header.Del(jetstream.ExpectedLastSubjSeqHeader)
		if _, err = b.js.PublishMsg(ctx, msg); err == nil && old != nil && old.NUID != "" {
			if perr := b.purgeSubject(ctx, stream, "$O."+bucket+".C."+old.NUID); perr != nil {
				return "", fmt.Errorf("bus: chunks of the object %s replaced: %w", name, perr)
			}
		}
	}
	if err != nil {
		return fail(err)
	}
	return nuid, nil
}
