package hiera

// Merge returns dst with src merged into it as CCM's deep merge does: maps
// merge key by key recursively, lists are concatenated (dst's items first),
// anything else from src replaces dst's. Neither input is modified and the
// result shares no map or list with them.
func Merge(dst, src map[string]any) map[string]any {
	return merge(dst, src, true)
}

// Override returns dst with src merged into it so that src always wins:
// maps merge key by key recursively, lists and other values from src
// replace dst's. It is how run-level data applies. Neither input is
// modified.
func Override(dst, src map[string]any) map[string]any {
	return merge(dst, src, false)
}

// shallow returns dst with src's top-level keys replacing dst's.
func shallow(dst, src map[string]any) map[string]any {
	out := cloneMap(dst)
	for k, v := range src {
		out[k] = clone(v)
	}
	return out
}

func merge(dst, src map[string]any, concat bool) map[string]any {
	out := cloneMap(dst)
	for k, v := range src {
		switch cur := out[k].(type) {
		case map[string]any:
			if m, ok := v.(map[string]any); ok {
				out[k] = merge(cur, m, concat)
				continue
			}
		case []any:
			if l, ok := v.([]any); ok && concat {
				joined := make([]any, 0, len(cur)+len(l))
				out[k] = append(append(joined, cur...), clone(l).([]any)...)
				continue
			}
		}
		out[k] = clone(v)
	}
	return out
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = clone(v)
	}
	return out
}

func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneMap(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = clone(e)
		}
		return out
	default:
		return v
	}
}
