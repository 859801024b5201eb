package hiera

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxAssignmentDepth bounds the dotted depth of an assignment key: 32.
const MaxAssignmentDepth = 32

// ParseAssignments turns "k=v" strings (--data, --fact) into a map. Dotted
// keys nest ("web.port=8080" is {web: {port: 8080}}); values are YAML
// scalars or flow collections ("8080" an int, "true" a bool, "[a, b]" a
// list, "" and "null" nil, anything else a string). Later assignments win;
// a key that is both a value and a parent of another key is an error.
func ParseAssignments(kvs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range kvs {
		k, raw, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w %q: write key=value", ErrAssignment, kv)
		}
		parts := strings.Split(k, ".")
		if len(parts) > MaxAssignmentDepth {
			return nil, fmt.Errorf("%w %q: key deeper than %d levels", ErrAssignment, kv, MaxAssignmentDepth)
		}
		var v any
		if err := yaml.Unmarshal([]byte(raw), &v); err != nil {
			v = raw // not YAML: the text itself
		}
		if _, isMap := v.(map[string]any); isMap {
			v = raw // "a: b" is text, not a map
		}
		cur := out
		for i, p := range parts {
			if p == "" {
				return nil, fmt.Errorf("%w %q: empty key segment", ErrAssignment, kv)
			}
			if i == len(parts)-1 {
				cur[p] = v
				break
			}
			next, exists := cur[p]
			if !exists {
				m := map[string]any{}
				cur[p], cur = m, m
				continue
			}
			m, isMap := next.(map[string]any)
			if !isMap {
				return nil, fmt.Errorf("%w %q: %s already holds a value", ErrAssignment, kv, strings.Join(parts[:i+1], "."))
			}
			cur = m
		}
	}
	return out, nil
}
