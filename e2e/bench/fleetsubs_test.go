package bench

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The subscription census groups a server's subscriptions by shared
// subject (one trie node every host's subscription sits in) and by
// shape (a host's own subjects added up), most held first.
func TestSubscriptionCensus(t *testing.T) {
	t.Parallel()
	var s subsz
	raw := `{"num_subscriptions": 7, "subscriptions_list": [
		{"subject": "manifold.control.*.cancel"}, {"subject": "manifold.control.*.cancel"}, {"subject": "manifold.control.*.cancel"},
		{"subject": "manifold.pinned.host-00001"}, {"subject": "manifold.pinned.host-00002"},
		{"subject": "_INBOX.abc1.*"}, {"subject": "manifold.api.runs.get", "qgroup": "q"}]}`
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	if got, want := sharedSubjects(&s, 8), []subjectCount{{"manifold.control.*.cancel", 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("shared subjects %v, want %v", got, want)
	}
	want := []subjectCount{{"manifold.control.*.cancel", 3}, {"manifold.pinned.#", 2}, {"_INBOX.#.*", 1}}
	if got := subjectShapes(&s, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("shapes %v, want %v", got, want)
	}
}

// A JetStream API request's kind is its verb and stream, without the
// message, subject or consumer it names.
func TestAPIKind(t *testing.T) {
	t.Parallel()
	for subject, want := range map[string]string{
		"$JS.API.STREAM.MSG.GET.MANIFOLD_PINNED":                         "STREAM.MSG.GET.MANIFOLD_PINNED",
		"$JS.API.STREAM.MSG.DELETE.MANIFOLD_PINNED":                      "STREAM.MSG.DELETE.MANIFOLD_PINNED",
		"$JS.API.DIRECT.GET.KV_manifold-workers.$KV.manifold-workers.h1": "DIRECT.GET.KV_manifold-workers",
		"$JS.API.STREAM.PURGE.KV_manifold-runs":                          "STREAM.PURGE.KV_manifold-runs",
		"$JS.API.CONSUMER.MSG.NEXT.MANIFOLD_TASKS.tasks-fleet":           "CONSUMER.MSG.NEXT",
		"$JS.API.STREAM.INFO.MANIFOLD_PINNED":                            "STREAM.INFO.MANIFOLD_PINNED",
		"$JS.API.INFO":                                                   "INFO",
	} {
		if got := apiKind(subject); got != want {
			t.Errorf("apiKind(%q) = %q, want %q", subject, got, want)
		}
	}
}
