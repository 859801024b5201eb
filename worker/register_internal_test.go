package worker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRegistrationEncodingMatchesMarshal: the registration a heartbeat
// writes, its facts encoded once per facts map, has the bytes
// json.Marshal gives of the Registration, and the digest is factsDigest's,
// with no facts, empty facts, nested facts, and values that need escaping.
func TestRegistrationEncodingMatchesMarshal(t *testing.T) {
	t.Parallel()
	seen := time.Date(2026, 11, 27, 9, 30, 0, 123, time.UTC)
	for name, facts := range map[string]map[string]any{
		"nil":    nil,
		"empty":  {},
		"nested": {"host": map[string]any{"info": map[string]any{"os": "linux", "cpus": 2}}, "ips": []any{"10.0.0.1", "::1"}, "b": true},
		"escape": {"motd": "<a & b>\u2028\"q\"", "z": nil, "n": 1.5},
	} {
		t.Run(name, func(t *testing.T) {
			reg := Registration{Name: "w1", Pools: []string{"web", "default"}, Concurrency: 2,
				Running: []string{"t1 file#/a"}, Version: "v1", Facts: facts, Started: seen.Add(-time.Hour), Seen: seen,
				Assignments: map[string]AssignmentStatus{"site": {}}, Fleet: &FleetStatus{}}
			want, err := json.Marshal(reg)
			require.NoError(t, err)
			var enc factsEncoding
			f := enc.encode(reg.Facts)
			got, err := json.Marshal(registrationJSON{Name: reg.Name, Pools: reg.Pools, Concurrency: reg.Concurrency,
				Running: reg.Running, Version: reg.Version, Facts: f.json, Started: reg.Started, Seen: reg.Seen,
				Assignments: reg.Assignments, Fleet: reg.Fleet})
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
			require.Equal(t, factsDigest(facts), f.digest)
		})
	}
}

// TestFactsEncodedOncePerRefresh: heartbeats of the same facts map do not
// encode it again; a refresh (a new map, even with equal contents) is
// encoded and digested anew.
func TestFactsEncodedOncePerRefresh(t *testing.T) {
	t.Parallel()
	var enc factsEncoding
	first := map[string]any{"gen": 1}
	for range 5 {
		f := enc.encode(first)
		require.JSONEq(t, `{"gen":1}`, string(f.json))
		require.Equal(t, factsDigest(first), f.digest)
	}
	require.Equal(t, 1, enc.encodes, "five heartbeats of one facts map encode it once")
	second := map[string]any{"gen": 2}
	f := enc.encode(second)
	require.JSONEq(t, `{"gen":2}`, string(f.json))
	require.Equal(t, factsDigest(second), f.digest)
	require.Equal(t, 2, enc.encodes)
	f = enc.encode(map[string]any{"gen": 2})
	require.Equal(t, factsDigest(second), f.digest)
	require.Equal(t, 3, enc.encodes, "a new map is encoded, whatever it holds")
	f = enc.encode(nil)
	require.Nil(t, f.json, "no facts: omitted from the registration")
	require.Equal(t, factsDigest(nil), f.digest)
	require.Equal(t, 4, enc.encodes)
	enc.encode(nil)
	require.Equal(t, 4, enc.encodes, "nil twice: encoded once")
}

// BenchmarkRegistrationEncoding: a heartbeat's registration with a host's
// facts (hostFacts: 120 leaves, ~5 KB of JSON, as `manifold facts` of a
// small VM): marshalled whole and digested, as before, or with the facts'
// encoding kept from the previous heartbeat.
func BenchmarkRegistrationEncoding(b *testing.B) {
	facts := hostFacts()
	reg := Registration{Name: "host-00001", Pools: []string{"fleet"}, Concurrency: 1, Running: []string{},
		Facts: facts, Started: time.Now().UTC(), Seen: time.Now().UTC()}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, _ := json.Marshal(reg)
			_ = factsDigest(reg.Facts)
			_ = data
		}
	})
	b.Run("cached-facts", func(b *testing.B) {
		b.ReportAllocs()
		var enc factsEncoding
		for b.Loop() {
			f := enc.encode(reg.Facts)
			data, _ := json.Marshal(registrationJSON{Name: reg.Name, Pools: reg.Pools, Concurrency: reg.Concurrency,
				Running: reg.Running, Facts: f.json, Started: reg.Started, Seen: reg.Seen})
			_ = data
		}
	})
}

// hostFacts is a facts map shaped like a small host's: nested maps of
// strings, numbers and lists.
func hostFacts() map[string]any {
	disks := map[string]any{}
	for i := range 8 {
		disks["sd"+string(rune('a'+i))] = map[string]any{"size": 1 << 30 * (i + 1), "model": "QEMU HARDDISK", "rotational": false}
	}
	ifaces := map[string]any{}
	for i := range 6 {
		ifaces["eth"+string(rune('0'+i))] = map[string]any{"mtu": 1500, "mac": "52:54:00:12:34:5" + string(rune('0'+i)),
			"addrs": []any{"10.0.0." + string(rune('1'+i)) + "/24", "fe80::5054:ff:fe12:345" + string(rune('0'+i)) + "/64"}}
	}
	env := map[string]any{}
	for i := range 30 {
		env["VAR_"+string(rune('A'+i%26))+string(rune('a'+i/26))] = "/usr/local/lib/value/number/" + string(rune('a'+i%26))
	}
	return map[string]any{
		"host": map[string]any{"info": map[string]any{"hostname": "host-00001", "os": "linux", "platform": "debian",
			"platformVersion": "12.7", "kernelVersion": "6.1.0-26-amd64", "uptime": 123456, "procs": 211}},
		"cpu":    map[string]any{"count": 2, "model": "Intel Xeon Processor (Icelake)", "mhz": 2600.0, "flags": []any{"fpu", "vme", "de", "pse", "tsc", "msr", "pae", "mce", "cx8", "apic", "sep", "mtrr", "pge", "mca", "cmov", "pat", "pse36", "clflush", "mmx", "fxsr", "sse", "sse2", "ss", "syscall", "nx", "avx", "avx2", "avx512f"}},
		"memory": map[string]any{"total": 4 << 30, "available": 3 << 30, "swap": 0},
		"disks":  disks, "network": ifaces, "environment": env,
		"role": "fleet", "node": "host-00001", "index": 1,
	}
}
