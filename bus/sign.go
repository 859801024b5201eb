package bus

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"sync"
)

// Signed outcomes.
//
// Every subject a worker may publish outcomes on is shared by all
// workers (manifold.outcomes.>), so the subject says nothing about who
// wrote a fact. A run's history is trusted through capabilities instead:
//
//   - each run has a secret (RunSecretSize random bytes) in its header,
//     which only coordinators read;
//   - each task message carries the token of its task attempt,
//     TaskToken(secret, run, task, attempt), in the message itself (never
//     in a body stored by reference, which every worker can read);
//   - the worker that received the task signs its outcome with the token
//     (SignOutcome), and keeps that MAC in its result record, so that a
//     replay forwards it;
//   - facts a coordinator writes itself (deadlines, cancellations, child
//     runs' outcomes) are signed with the run secret (SignFact).
//
// A coordinator applies only a fact whose MAC it can recompute.

// RunSecretSize is the length of a run's secret in bytes.
const RunSecretSize = 32

// NewRunSecret returns a fresh random run secret.
func NewRunSecret() ([]byte, error) {
	s := make([]byte, RunSecretSize)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("bus: run secret: %w", err)
	}
	return s, nil
}

// ChildSecret returns the secret of a child run, derived from its
// parent's: the parent's coordinator can sign facts of a child run (its
// cancellation) before the child's header exists.
func ChildSecret(parent []byte, childRunID string) []byte {
	if len(parent) == 0 {
		return nil
	}
	st := macStates.Get().(*macState)
	defer macStates.Put(st)
	st.buf = append(append(st.buf[:0], "child\x00"...), childRunID...)
	macSum(st, parent)
	return append([]byte(nil), st.mac[:]...)
}

// TaskToken returns the capability of one task attempt of a run: the
// HMAC-SHA256 of "task\x00<run>\x00<task>\x00<attempt>" keyed with the
// run's secret, hex-encoded. It depends on nothing else, so a coordinator
// resuming the run derives the same tokens.
func TaskToken(secret []byte, runID string, task, attempt int) string {
	st := macStates.Get().(*macState)
	defer macStates.Put(st)
	b := append(st.buf[:0], "task\x00"...)
	b = append(b, runID...)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(task), 10)
	b = append(b, 0)
	st.buf = strconv.AppendInt(b, int64(attempt), 10)
	return macHex(st, secret)
}

// SignOutcome sets o.MAC: the outcome signed with the token of the task
// attempt it answers. An empty token (a task from a coordinator that
// sends none) leaves o unsigned.
func SignOutcome(o *Outcome, token string) {
	if token == "" {
		o.MAC = ""
		return
	}
	o.MAC = outcomeMAC(*o, token, "outcome")
}

// VerifyOutcome reports whether o carries a valid MAC made with token.
func VerifyOutcome(o Outcome, token string) bool {
	return token != "" && o.MAC != "" && equalMAC(o.MAC, outcomeMAC(o, token, "outcome"))
}

// SignFact sets o.MAC: a fact a coordinator writes into a run's history,
// signed with the run's secret.
func SignFact(o *Outcome, secret []byte) {
	if len(secret) == 0 {
		o.MAC = ""
		return
	}
	o.MAC = outcomeMAC(*o, secret, "fact")
}

// VerifyFact reports whether o carries a valid MAC made with the run's
// secret.
func VerifyFact(o Outcome, secret []byte) bool {
	return len(secret) > 0 && o.MAC != "" && equalMAC(o.MAC, outcomeMAC(o, secret, "fact"))
}

// outcomeMAC is the hex HMAC-SHA256 of the canonical encoding of o's
// decisive fields under domain ("outcome" or "fact"): every field but
// those a replay of a recorded outcome changes (Replayed, Delivery) and
// the MAC itself. Each value is length-prefixed, so no two outcomes
// encode alike. o is passed by value: a pointer given to a generic
// function through its dictionary escapes, and every outcome signed or
// verified was on the heap.
func outcomeMAC[K string | []byte](o Outcome, key K, domain string) string {
	st := macStates.Get().(*macState)
	defer macStates.Put(st)
	w := macWriter{b: st.buf[:0]}
	w.str2("manifold-", domain, "-v1")
	w.str(o.RunID)
	w.int(int64(o.Task))
	w.int(int64(o.Attempt))
	w.str(string(o.Kind))
	w.str(o.Ref)
	w.str(string(o.Status))
	w.bool(o.Changed)
	w.bool(o.Refreshed)
	w.str(o.Message)
	w.str(o.Diff)
	w.str(o.Error)
	w.int(o.DurationMS)
	w.str(o.Worker)
	w.int(int64(len(o.HealthChecks)))
	for _, hc := range o.HealthChecks {
		w.str(hc.Name)
		w.str(hc.Status)
		w.str(hc.Output)
		w.int(int64(hc.Tries))
		w.bool(hc.Ignored)
	}
	st.buf = w.b
	return macHex(st, key)
}

// equalMAC compares two MACs in time independent of where they differ
// (as hmac.Equal, without copying them to byte slices).
func equalMAC(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := range len(a) {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

// macWriter appends the canonical encoding of a MAC's message.
type macWriter struct{ b []byte }

func (w *macWriter) int(v int64) { w.b = binary.AppendVarint(w.b, v) }

func (w *macWriter) str(s string) {
	w.int(int64(len(s)))
	w.b = append(w.b, s...)
}

// str2 appends a+b+c as one string value.
func (w *macWriter) str2(a, b, c string) {
	w.int(int64(len(a) + len(b) + len(c)))
	w.b = append(append(append(w.b, a...), b...), c...)
}

func (w *macWriter) bool(v bool) {
	if v {
		w.int(1)
	} else {
		w.int(0)
	}
}

// maxMACMessage is the largest message buffer a pooled macState keeps
// (an outcome with a long diff is encoded in a buffer of its own size
// and that buffer is dropped, not pooled).
const maxMACMessage = 64 << 10

// macStates pools what an HMAC-SHA256 needs: crypto/hmac.New allocates
// two digests and their pads per MAC, and every MAC here has another key
// (a task attempt's token), so the state is reused and the key set per
// call instead. A MAC then allocates its hex string only.
var macStates = sync.Pool{New: func() any { return &macState{h: sha256.New()} }}

type macState struct {
	h     hash.Hash
	buf   []byte // the message
	pad   [sha256.BlockSize]byte
	inner [sha256.Size]byte
	mac   [sha256.Size]byte
	out   [2 * sha256.Size]byte
}

// macSum sets st.mac to HMAC-SHA256(key, st.buf) (RFC 2104, as
// crypto/hmac). The key is a string or bytes: a token is used as it is,
// never copied.
func macSum[K string | []byte](st *macState, key K) {
	var k [sha256.BlockSize]byte
	if len(key) > sha256.BlockSize {
		st.inner = sha256.Sum256([]byte(key))
		copy(k[:], st.inner[:])
	} else {
		copy(k[:], key)
	}
	for i := range st.pad {
		st.pad[i] = k[i] ^ 0x36
	}
	st.h.Reset()
	st.h.Write(st.pad[:])
	st.h.Write(st.buf)
	inner := st.h.Sum(st.inner[:0])
	for i := range st.pad {
		st.pad[i] = k[i] ^ 0x5c
	}
	st.h.Reset()
	st.h.Write(st.pad[:])
	st.h.Write(inner)
	st.h.Sum(st.mac[:0])
	if cap(st.buf) > maxMACMessage {
		st.buf = nil
	}
}

// macHex returns the hex HMAC-SHA256 of st.buf keyed with key.
func macHex[K string | []byte](st *macState, key K) string {
	macSum(st, key)
	hex.Encode(st.out[:], st.mac[:])
	return string(st.out[:])
}
