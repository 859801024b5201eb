package document_test

import (
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/document"
)

// TestOwnBucketsRefused: a manifest may not write manifold's own buckets;
// validation says so, naming the bucket. The reserved prefix is the bus's.
func TestOwnBucketsRefused(t *testing.T) {
	t.Parallel()
	for _, b := range []string{bus.BucketRuns, bus.BucketWorkers, bus.BucketResults, bus.BucketBundles, bus.BucketReports} {
		if !bus.IsOwnBucket(b) {
			t.Fatalf("bus bucket %s does not start with %s", b, bus.OwnBucketPrefix)
		}
	}
	for _, name := range []string{"kv://" + bus.BucketWorkers + "/w1", "kv://" + bus.BucketResults + "/x", "kv://manifold-anything/k"} {
		res, err := document.New(resources.Spec{Type: document.Type, Name: name, Properties: map[string]any{"content": map[string]any{"a": 1}}})
		if err != nil {
			t.Fatal(err)
		}
		err = res.Validate()
		bucket := strings.SplitN(strings.TrimPrefix(name, "kv://"), "/", 2)[0]
		if err == nil || !strings.Contains(err.Error(), `bucket "`+bucket+`" is manifold's own`) || !strings.Contains(err.Error(), bus.OwnBucketPrefix) {
			t.Fatalf("%s: Validate: %v", name, err)
		}
	}
	res, _ := document.New(resources.Spec{Type: document.Type, Name: "kv://apps/manifold-key", Properties: map[string]any{"content": map[string]any{"a": 1}}})
	if err := res.Validate(); err != nil {
		t.Fatalf("a key named manifold-*: %v", err)
	}
}
