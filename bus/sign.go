package bus

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
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
	m := hmac.New(sha256.New, parent)
	m.Write([]byte("child\x00" + childRunID))
	return m.Sum(nil)
}

// TaskToken returns the capability of one task attempt of a run: the
// HMAC-SHA256 of "task\x00<run>\x00<task>\x00<attempt>" keyed with the
// run's secret, hex-encoded. It depends on nothing else, so a coordinator
// resuming the run derives the same tokens.
func TaskToken(secret []byte, runID string, task, attempt int) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("task\x00" + runID + "\x00" + strconv.Itoa(task) + "\x00" + strconv.Itoa(attempt)))
	return hex.EncodeToString(m.Sum(nil))
}

// SignOutcome sets o.MAC: the outcome signed with the token of the task
// attempt it answers. An empty token (a task from a coordinator that
// sends none) leaves o unsigned.
func SignOutcome(o *Outcome, token string) {
	if token == "" {
		o.MAC = ""
		return
	}
	o.MAC = outcomeMAC(o, []byte(token), "outcome")
}

// VerifyOutcome reports whether o carries a valid MAC made with token.
func VerifyOutcome(o Outcome, token string) bool {
	return token != "" && o.MAC != "" && hmac.Equal([]byte(o.MAC), []byte(outcomeMAC(&o, []byte(token), "outcome")))
}

// SignFact sets o.MAC: a fact a coordinator writes into a run's history,
// signed with the run's secret.
func SignFact(o *Outcome, secret []byte) {
	if len(secret) == 0 {
		o.MAC = ""
		return
	}
	o.MAC = outcomeMAC(o, secret, "fact")
}

// VerifyFact reports whether o carries a valid MAC made with the run's
// secret.
func VerifyFact(o Outcome, secret []byte) bool {
	return len(secret) > 0 && o.MAC != "" && hmac.Equal([]byte(o.MAC), []byte(outcomeMAC(&o, secret, "fact")))
}

// outcomeMAC is the hex HMAC-SHA256 of the canonical encoding of o's
// decisive fields under domain ("outcome" or "fact"): every field but
// those a replay of a recorded outcome changes (Replayed, Delivery) and
// the MAC itself. Each value is length-prefixed, so no two outcomes
// encode alike.
func outcomeMAC(o *Outcome, key []byte, domain string) string {
	m := hmac.New(sha256.New, key)
	w := macWriter{h: m}
	w.str("manifold-" + domain + "-v1")
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
	return hex.EncodeToString(m.Sum(nil))
}

type macWriter struct{ h hash.Hash }

func (w macWriter) int(v int64) {
	var b [binary.MaxVarintLen64]byte
	w.h.Write(b[:binary.PutVarint(b[:], v)])
}

func (w macWriter) str(s string) {
	w.int(int64(len(s)))
	w.h.Write([]byte(s))
}

func (w macWriter) bool(v bool) {
	if v {
		w.int(1)
	} else {
		w.int(0)
	}
}
