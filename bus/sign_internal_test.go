package bus

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// refOutcomeMAC is the encoding the MACs had through crypto/hmac: a
// pooled state must give the same bytes (histories and workers of the
// previous release verify them).
func refOutcomeMAC(o *Outcome, key []byte, domain string) string {
	m := hmac.New(sha256.New, key)
	i := func(v int64) {
		var b [binary.MaxVarintLen64]byte
		m.Write(b[:binary.PutVarint(b[:], v)])
	}
	s := func(v string) { i(int64(len(v))); m.Write([]byte(v)) }
	bl := func(v bool) {
		if v {
			i(1)
		} else {
			i(0)
		}
	}
	s("manifold-" + domain + "-v1")
	s(o.RunID)
	i(int64(o.Task))
	i(int64(o.Attempt))
	s(string(o.Kind))
	s(o.Ref)
	s(string(o.Status))
	bl(o.Changed)
	bl(o.Refreshed)
	s(o.Message)
	s(o.Diff)
	s(o.Error)
	i(o.DurationMS)
	s(o.Worker)
	i(int64(len(o.HealthChecks)))
	for _, hc := range o.HealthChecks {
		s(hc.Name)
		s(hc.Status)
		s(hc.Output)
		i(int64(hc.Tries))
		bl(hc.Ignored)
	}
	return hex.EncodeToString(m.Sum(nil))
}

func TestPooledMACsMatchCryptoHMAC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	str := func(n int) string {
		b := make([]byte, r.IntN(n+1))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return string(b)
	}
	// Keys across the block size (64: a token) and past it (hashed first);
	// messages up to and past the pooled buffer's limit.
	for _, keyLen := range []int{0, 1, 32, 63, 64, 65, 200} {
		for n := range 30 {
			key := []byte(str(keyLen))[:0]
			for len(key) < keyLen {
				key = append(key, byte(r.UintN(256)))
			}
			o := Outcome{RunID: str(30), Task: r.IntN(1 << 20), Attempt: r.IntN(5), Kind: FactKind(str(6)), Ref: str(80),
				Status: TaskStatus(str(8)), Changed: r.IntN(2) == 0, Refreshed: r.IntN(2) == 0, Message: str(100),
				Error: str(50), DurationMS: r.Int64(), Worker: str(20)}
			if n%5 == 0 {
				o.Diff = strings.Repeat("x", maxMACMessage+r.IntN(100))
			}
			for range r.IntN(3) {
				o.HealthChecks = append(o.HealthChecks, HealthCheck{Name: str(10), Status: str(5), Output: str(40), Tries: r.IntN(4), Ignored: r.IntN(2) == 0})
			}
			for _, domain := range []string{"outcome", "fact"} {
				require.Equal(t, refOutcomeMAC(&o, key, domain), outcomeMAC(o, key, domain), "key %d bytes, outcome %d", keyLen, n)
			}
			run, task, attempt := str(30), r.IntN(1<<30), r.IntN(9)
			m := hmac.New(sha256.New, key)
			m.Write([]byte("task\x00" + run + "\x00" + strconv.Itoa(task) + "\x00" + strconv.Itoa(attempt)))
			require.Equal(t, hex.EncodeToString(m.Sum(nil)), TaskToken(key, run, task, attempt))
			if len(key) > 0 {
				m = hmac.New(sha256.New, key)
				m.Write([]byte("child\x00" + run))
				require.Equal(t, m.Sum(nil), ChildSecret(key, run))
			}
		}
	}
}

// A MAC allocates its result only (crypto/hmac.New with a writer per
// field made 27 allocations per outcome MAC).
func TestMACAllocations(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, RunSecretSize)
	token := TaskToken(secret, "r1", 4, 2)
	o := Outcome{RunID: "r1", Task: 4, Attempt: 2, Ref: "file#/etc/motd", Status: TaskStable, Worker: "w1", DurationMS: 3}
	SignOutcome(&o, token)
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() { SignOutcome(&o, token) }), 1.0)
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() {
		if !VerifyOutcome(o, token) {
			t.Fatal("not verified")
		}
	}), 1.0)
	require.LessOrEqual(t, testing.AllocsPerRun(100, func() { TaskToken(secret, "r1", 4, 2) }), 1.0)
}

// BenchmarkOutcomeMAC: the MAC of a stable file's outcome, through
// crypto/hmac as before (hmac) and the pooled state (pooled).
func BenchmarkOutcomeMAC(b *testing.B) {
	token := TaskToken(bytes.Repeat([]byte{7}, RunSecretSize), "r1", 4, 2)
	o := Outcome{RunID: "01JFZQ4W9S6T3B7V1X0Y2Z3A4B", Task: 4, Attempt: 1, Ref: "file#/srv/bench/f01234", Status: TaskStable, Worker: "w1", DurationMS: 3}
	b.Run("hmac", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			refOutcomeMAC(&o, []byte(token), "outcome")
		}
	})
	b.Run("pooled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			outcomeMAC(o, token, "outcome")
		}
	})
}
