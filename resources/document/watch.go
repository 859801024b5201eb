package document

import (
	"strings"

	"github.com/manifold-run/manifold/resources"
)

var _ resources.Watcher = (*Document)(nil)

// WatchTargets is the document's file, or for a kv:// document its KV
// entry (watched through the bucket: converge.KVWatcher). A kv:// name
// that does not parse has none: the run reports it.
func (d *Document) WatchTargets() []resources.WatchTarget {
	if strings.HasPrefix(d.Name, kvScheme) {
		bucket, key, err := splitKV(d.Name)
		if err != nil {
			return nil
		}
		return []resources.WatchTarget{{Bucket: bucket, Key: key}}
	}
	return []resources.WatchTarget{{Path: d.Name}}
}
