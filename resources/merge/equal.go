package merge

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// ScalarKey renders a scalar canonically, so that values equal as JSON
// compare equal as strings: the number 8080 is the same whether it was
// decoded as an int, an int64, a float64 or a json.Number, and differs from
// the string "8080". Maps and lists render as compact JSON.
func ScalarKey(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(t)
	case string:
		return strconv.Quote(t)
	case int:
		return strconv.FormatInt(int64(t), 10)
	case int8:
		return strconv.FormatInt(int64(t), 10)
	case int16:
		return strconv.FormatInt(int64(t), 10)
	case int32:
		return strconv.FormatInt(int64(t), 10)
	case int64:
		return strconv.FormatInt(t, 10)
	case uint:
		return strconv.FormatUint(uint64(t), 10)
	case uint8:
		return strconv.FormatUint(uint64(t), 10)
	case uint16:
		return strconv.FormatUint(uint64(t), 10)
	case uint32:
		return strconv.FormatUint(uint64(t), 10)
	case uint64:
		return strconv.FormatUint(t, 10)
	case float32:
		return floatKey(float64(t))
	case float64:
		return floatKey(t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if f, err := t.Float64(); err == nil {
			return floatKey(f)
		}
		return t.String()
	case map[string]any, []any:
		return compact(t)
	default:
		return fmt.Sprintf("%T:%v", v, v)
	}
}

func floatKey(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Equal reports whether a and b are the same document: maps with the same
// keys and equal values, lists with equal items in the same order, scalars
// with the same ScalarKey. Key order and number representation do not count.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		switch b.(type) {
		case map[string]any, []any:
			return false
		}
		return ScalarKey(a) == ScalarKey(b)
	}
}

// compact renders v as one line of JSON (or %v when it is not JSON).
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
