package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// subsz is the part of the server's /subsz monitoring answer the fleet
// harness reads: the subscription trie's counters (cumulative since the
// server started) and, with subs=1, the subscriptions.
type subsz struct {
	NumSubs      uint32  `json:"num_subscriptions"`
	NumCache     uint32  `json:"num_cache"`
	NumInserts   uint64  `json:"num_inserts"`
	NumRemoves   uint64  `json:"num_removes"`
	NumMatches   uint64  `json:"num_matches"`
	CacheHitRate float64 `json:"cache_hit_rate"`
	MaxFanout    uint32  `json:"max_fanout"`
	AvgFanout    float64 `json:"avg_fanout"`
	Subs         []struct {
		Subject string `json:"subject"`
		Queue   string `json:"qgroup"`
	} `json:"subscriptions_list"`
}

// fetchSubsz reads the server's /subsz from its monitoring port; with
// subs, every subscription too (limit: the subscriptions listed at
// most).
func fetchSubsz(ctx context.Context, port int, subs bool, limit int) (*subsz, []byte, error) {
	url := fmt.Sprintf("http://127.0.0.1:%d/subsz", port)
	if subs {
		url += fmt.Sprintf("?subs=1&limit=%d", limit)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %s: %w", url, err)
	}
	var s subsz
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, nil, fmt.Errorf("bench: %s: %w", url, err)
	}
	return &s, data, nil
}

// subjectCount is how many subscriptions share one subject (or one
// shape of subject).
type subjectCount struct {
	Subject string
	Count   int
}

// sharedSubjects returns the subjects (with their queue group) that more
// than one subscription holds, most held first, at most top: a subject
// every host subscribes to is one trie node whose every subscription a
// matching publish delivers to.
func sharedSubjects(s *subsz, top int) []subjectCount {
	n := map[string]int{}
	for _, sub := range s.Subs {
		k := sub.Subject
		if sub.Queue != "" {
			k += " queue=" + sub.Queue
		}
		n[k]++
	}
	var out []subjectCount
	for k, c := range n {
		if c > 1 {
			out = append(out, subjectCount{k, c})
		}
	}
	return topCounts(out, top)
}

// subjectShapes counts the subscriptions by the shape of their subject:
// each token holding a digit (a host's name, an inbox's or a run's ID) is
// replaced by '#', so per-host subjects add up under one shape.
func subjectShapes(s *subsz, top int) []subjectCount {
	n := map[string]int{}
	for _, sub := range s.Subs {
		toks := strings.Split(sub.Subject, ".")
		for i, t := range toks {
			if strings.ContainsAny(t, "0123456789") {
				toks[i] = "#"
			}
		}
		n[strings.Join(toks, ".")]++
	}
	var out []subjectCount
	for k, c := range n {
		out = append(out, subjectCount{k, c})
	}
	return topCounts(out, top)
}

func topCounts(s []subjectCount, top int) []subjectCount {
	slices.SortFunc(s, func(a, b subjectCount) int { return cmp.Or(b.Count-a.Count, strings.Compare(a.Subject, b.Subject)) })
	return s[:min(len(s), top)]
}

// logSubs logs the server's subscription trie over the runs (matches,
// cache hit rate, fan-out, counted since the server started; before
// is the census taken before the first run) and how the subscriptions
// are spread: the subjects several subscriptions share and the shapes
// of subject. With dir, the whole listing is written there too.
func (c *cluster) logSubs(ctx context.Context, port, n int, before *subsz, dir string) {
	s, raw, err := fetchSubsz(ctx, port, true, 4*n+10000)
	if err != nil {
		c.h.log.Warn("fleet: server subscriptions", "error", err)
		return
	}
	attrs := []any{"hosts", n, "subscriptions", s.NumSubs, "matches", s.NumMatches, "cache_hit_rate", s.CacheHitRate,
		"max_fanout", s.MaxFanout, "avg_fanout", s.AvgFanout, "inserts", s.NumInserts, "removes", s.NumRemoves}
	if before != nil {
		attrs = append(attrs, "matches_over_runs", s.NumMatches-before.NumMatches, "inserts_over_runs", s.NumInserts-before.NumInserts)
	}
	c.h.log.Info("fleet subscriptions", attrs...)
	for _, sc := range sharedSubjects(s, 8) {
		c.h.log.Info("fleet shared subject", "hosts", n, "subject", sc.Subject, "subscriptions", sc.Count)
	}
	for _, sc := range subjectShapes(s, 12) {
		c.h.log.Info("fleet subject shape", "hosts", n, "shape", sc.Subject, "subscriptions", sc.Count)
	}
	if dir != "" {
		if err := os.WriteFile(fmt.Sprintf("%s/server-subsz-%d.json", dir, n), raw, 0o644); err != nil {
			c.h.log.Warn("fleet: server subscriptions", "error", err)
		}
	}
}

// apiCount counts the JetStream API requests the server is sent, by
// kind: the API verb and its stream, the stream's name with digits
// kept (STREAM.MSG.GET.MANIFOLD_PINNED, DIRECT.GET.KV_manifold-runs).
type apiCount struct {
	sub *nats.Subscription
	mu  sync.Mutex
	n   map[string]int
}

// countAPI subscribes to every JetStream API request on nc.
func countAPI(nc *nats.Conn) (*apiCount, error) {
	a := &apiCount{n: map[string]int{}}
	sub, err := nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		k := apiKind(m.Subject)
		a.mu.Lock()
		a.n[k]++
		a.mu.Unlock()
	})
	if err != nil {
		return nil, fmt.Errorf("bench: count API requests: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	a.sub = sub
	return a, nil
}

// apiKind is the kind of a JetStream API request subject: its verb and
// stream, without what follows (a direct get's subject, a consumer's
// name).
func apiKind(subject string) string {
	toks := strings.Split(strings.TrimPrefix(subject, "$JS.API."), ".")
	switch {
	case len(toks) >= 3 && toks[0] == "STREAM" && toks[1] == "MSG":
		return strings.Join(toks[:4], ".")
	case len(toks) >= 3 && (toks[0] == "CONSUMER" || toks[0] == "DIRECT"):
		return strings.Join(toks[:3], ".")
	default:
		return strings.Join(toks[:min(len(toks), 3)], ".")
	}
}

// stop ends the count and returns it as log attributes, most asked
// first.
func (a *apiCount) stop() []any {
	_ = a.sub.Unsubscribe()
	a.mu.Lock()
	defer a.mu.Unlock()
	var s []subjectCount
	for k, v := range a.n {
		s = append(s, subjectCount{k, v})
	}
	var out []any
	for _, sc := range topCounts(s, 16) {
		out = append(out, sc.Subject, sc.Count)
	}
	return out
}

// perHost is the requests counted per host.
func (a *apiCount) perHost(n int) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for _, v := range a.n {
		total += v
	}
	return float64(total) / float64(max(n, 1))
}
