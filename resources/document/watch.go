package document

import (
	"strings"

	"github.com/manifold-run/manifold/resources"
)

var _ resources.Watcher = (*Document)(nil)

// WatchTargets is the document's file. A kv:// document has none here:
// its entry changes are watched through the bucket (a KV watch), not the
// file system, so until then the interval covers it.
func (d *Document) WatchTargets() []resources.WatchTarget {
	if strings.HasPrefix(d.Name, kvScheme) {
		return nil
	}
	return []resources.WatchTarget{{Path: d.Name}}
}
