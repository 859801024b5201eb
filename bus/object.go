package bus

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// objectChunkWait bounds one direct get of an object chunk; a get that
// timed out is asked again (another replica may answer) until ctx ends.
const objectChunkWait = 2 * time.Second

// readObject reads an object of an object store bucket with direct gets,
// which any live replica of the bucket's stream answers. The client's own
// object reader follows the chunks with an ephemeral consumer, and a
// consumer placed on a node just lost is waited on for many seconds while
// the cluster notices; a direct get is not. limit (when > 0) refuses an
// object larger than it before reading a chunk. The object's digest is
// checked.
func (b *Bus) readObject(ctx context.Context, store jetstream.ObjectStore, bucket, key string, limit int64) ([]byte, error) {
	info, err := store.GetInfo(ctx, key)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			err = ErrNotFound
		}
		return nil, err
	}
	if limit > 0 && int64(info.Size) > limit {
		return nil, fmt.Errorf("%w: %d bytes exceeds the limit of %d bytes", ErrTooLarge, info.Size, limit)
	}
	api := "$JS.API.DIRECT.GET.OBJ_" + bucket
	if b.cfg.Domain != "" { // a leafnode's client: the domain's API
		api = "$JS." + b.cfg.Domain + ".API.DIRECT.GET.OBJ_" + bucket
	}
	subject := "$O." + bucket + ".C." + info.NUID
	data := make([]byte, 0, info.Size)
	seq := uint64(0)
	for range info.Chunks {
		req, _ := json.Marshal(struct {
			Seq  uint64 `json:"seq"`
			Next string `json:"next_by_subj"`
		}{seq + 1, subject})
		msg, err := b.directGet(ctx, api, req)
		if err != nil {
			return nil, fmt.Errorf("object %s/%s: %w", bucket, key, err)
		}
		if status := msg.Header.Get("Status"); status != "" {
			return nil, fmt.Errorf("object %s/%s: chunk after sequence %d: status %s %s", bucket, key, seq, status, msg.Header.Get("Description"))
		}
		if seq, err = strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64); err != nil {
			return nil, fmt.Errorf("object %s/%s: chunk without a sequence", bucket, key)
		}
		data = append(data, msg.Data...)
	}
	if uint64(len(data)) != info.Size {
		return nil, fmt.Errorf("object %s/%s: read %d bytes of %d", bucket, key, len(data), info.Size)
	}
	sum := sha256.Sum256(data)
	if want := "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:]); info.Digest != "" && info.Digest != want {
		return nil, fmt.Errorf("object %s/%s: digest mismatch", bucket, key)
	}
	return data, nil
}

// directGet sends a direct get request, asking again when it times out or
// finds no responder (a replica lost, the cluster electing) until ctx ends.
func (b *Bus) directGet(ctx context.Context, api string, req []byte) (*nats.Msg, error) {
	for {
		rctx, cancel := context.WithTimeout(ctx, objectChunkWait)
		msg, err := b.nc.RequestWithContext(rctx, api, req)
		cancel()
		if err == nil {
			return msg, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
			return nil, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// purgeSubject removes every message of stream on subject (a filter,
// wildcards allowed) with one JetStream purge request: no marker is left,
// so the stream keeps no state for the subject afterwards (a KV delete or
// an object store delete leaves one message per key, kept for ever).
func (b *Bus) purgeSubject(ctx context.Context, stream, subject string) error {
	if _, ok := ctx.Deadline(); !ok {
		// As nats.go's JetStream API requests: a context without a
		// deadline waits apiRequestWait (a server gone away would
		// otherwise hold the caller for ever: a run's finish, cleaning
		// up after a failed report put).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, apiRequestWait)
		defer cancel()
	}
	req, _ := json.Marshal(struct {
		Filter string `json:"filter"`
	}{subject})
	msg, err := b.nc.RequestWithContext(ctx, b.apiPrefix()+"STREAM.PURGE."+stream, req)
	if err != nil {
		return fmt.Errorf("bus: purge %s of %s: %w", subject, stream, err)
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Code        int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("bus: purge %s of %s: unreadable reply: %w", subject, stream, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("bus: purge %s of %s: %s (%d)", subject, stream, resp.Error.Description, resp.Error.Code)
	}
	return nil
}

// PurgeKey removes key from bkt by subject: the key's values and any
// delete marker go, and the bucket's stream keeps nothing of it (Delete
// keeps a marker per key). A key that does not exist is not an error.
func (b *Bus) PurgeKey(ctx context.Context, bkt *Bucket, key string) error {
	name := bkt.kv.Bucket()
	return b.purgeSubject(ctx, "KV_"+name, "$KV."+name+"."+key)
}

// PurgeReport removes the stored report of runID (its chunks and its
// description) by subject, leaving no marker. A run without a stored
// report is not an error. A report this process stored (PutReport) is
// not looked up: its chunks' subject was remembered.
func (b *Bus) PurgeReport(ctx context.Context, runID string) error {
	stream := "OBJ_" + BucketReports
	nuid, ok := b.reportNUIDs.take(runID)
	if !ok {
		store, err := b.reportStore(ctx)
		if err != nil {
			return err
		}
		info, err := store.GetInfo(ctx, runID, jetstream.GetObjectInfoShowDeleted())
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil
		} else if err != nil {
			return fmt.Errorf("bus: purge report of %s: %w", runID, err)
		}
		nuid = info.NUID
	}
	if nuid != "" {
		if err := b.purgeSubject(ctx, stream, "$O."+BucketReports+".C."+nuid); err != nil {
			return err
		}
	}
	return b.purgeSubject(ctx, stream, "$O."+BucketReports+".M."+base64.URLEncoding.EncodeToString([]byte(runID)))
}

// PurgeEvents removes the progress events of runID, a run of the tree
// rootRunID, from the events stream by subject.
func (b *Bus) PurgeEvents(ctx context.Context, rootRunID, runID string) error {
	return b.purgeSubject(ctx, StreamEvents, "manifold.events."+token(rootRunID)+"."+token(runID)+".>")
}

// pruneStep bounds the subjects one PruneReports call removes, so that a
// store far over its bounds (lowered by hand) is brought back over
// several calls rather than one long one.
const pruneStep = 256

// PruneReports removes the oldest stored reports, by subject (no marker
// left), while the store holds more than maxReports (0: no bound), its
// oldest message is older than maxAge (0: no bound) or it holds more than
// maxBytes (0: no bound; the bytes bound never removes the last report
// left). Reports go oldest first, as stored: a report's chunks, then its
// description; removed is called with the run ID of each report whose
// description goes. It returns how many reports were removed; it stops
// after pruneStep subjects (the next call goes on).
func (b *Bus) PruneReports(ctx context.Context, maxReports int, maxAge time.Duration, maxBytes int64, removed func(runID string)) (int, error) {
	if maxReports <= 0 && maxAge <= 0 && maxBytes <= 0 {
		return 0, nil
	}
	stream := "OBJ_" + BucketReports
	s, err := b.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("bus: prune reports: %w", err)
	}
	meta := "$O." + BucketReports + ".M."
	n := 0
	// partial: a report's chunks went, its description (the next
	// message) goes too, whatever the bounds say now.
	partial := false
	for range pruneStep {
		info, err := s.Info(ctx)
		if err != nil {
			return n, fmt.Errorf("bus: prune reports: %w", err)
		}
		st := info.State
		if st.Msgs == 0 {
			return n, nil
		}
		// A report is two subjects: its chunks' and its description's.
		over := maxReports > 0 && (st.NumSubjects+1)/2 > uint64(maxReports)
		old := maxAge > 0 && st.Msgs > 0 && time.Since(st.FirstTime) > maxAge
		big := maxBytes > 0 && st.Bytes > uint64(maxBytes) && st.NumSubjects > 2
		if !over && !old && !big && !partial {
			return n, nil
		}
		msg, err := s.GetMsg(ctx, st.FirstSeq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // removed meanwhile
		} else if err != nil {
			return n, fmt.Errorf("bus: prune reports: oldest message %d: %w", st.FirstSeq, err)
		}
		if err := b.purgeSubject(ctx, stream, msg.Subject); err != nil {
			return n, err
		}
		enc, isMeta := strings.CutPrefix(msg.Subject, meta)
		partial = !isMeta
		if isMeta {
			if name, err := base64.URLEncoding.DecodeString(enc); err == nil && removed != nil {
				removed(string(name))
			}
			n++
		}
	}
	return n, nil
}
