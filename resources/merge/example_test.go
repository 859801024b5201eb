package merge_test

import (
	"encoding/json"
	"fmt"

	"github.com/manifold-run/manifold/resources/merge"
)

// An application added "cache" and a listener of its own; manifold changes
// the log level, stops declaring "debug" and adds a listener.
func ExampleMerge() {
	var last, observed, desired any
	_ = json.Unmarshal([]byte(`{"log": {"level": "info", "debug": true}, "listeners": [{"port": 80}]}`), &last)
	_ = json.Unmarshal([]byte(`{"log": {"level": "info", "debug": true}, "cache": "on", "listeners": [{"port": 80}, {"port": 9090, "admin": true}]}`), &observed)
	_ = json.Unmarshal([]byte(`{"log": {"level": "warn"}, "listeners": [{"port": 80}, {"port": 443}]}`), &desired)

	merged, err := merge.Merge(last, observed, desired, merge.Options{})
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(merged)
	fmt.Println(string(out))
	fmt.Print(merge.Diff(observed, merged))
	// Output:
	// {"cache":"on","listeners":[{"port":80},{"admin":true,"port":9090},{"port":443}],"log":{"level":"warn"}}
	// + listeners[port=443]: {"port":443}
	// - log.debug: true
	// ~ log.level: "info" → "warn"
}
