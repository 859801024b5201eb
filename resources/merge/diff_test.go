package merge

import (
	"fmt"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, old, new, want string }{
		{"equal despite number types", `{"a": 1, "l": [1.0]}`, `{"a": 1.0, "l": [1]}`, ""},
		{"fields", `{"log": {"level": "debug", "color": true}}`, `{"log": {"level": "info", "format": "json"}}`,
			"- log.color: true\n+ log.format: \"json\"\n~ log.level: \"debug\" → \"info\"\n"},
		{"list items by index", `{"l": [{"p": 1}, {"p": 2}]}`, `{"l": [{"p": 1}, {"p": 3}]}`, "~ l[1].p: 2 → 3\n"},
		{"list items by key", `{"l": [{"name": "a", "v": 1}, {"name": "b"}]}`, `{"l": [{"name": "c"}, {"name": "a", "v": 2}]}`,
			"~ l[name=\"a\"].v: 1 → 2\n- l[name=\"b\"]: {\"name\":\"b\"}\n+ l[name=\"c\"]: {\"name\":\"c\"}\n"},
		{"list length change", `{"l": [1]}`, `{"l": [1, 2]}`, "~ l: [1] → [1,2]\n"},
		{"new document", ``, `{"a": 1}`, "+ (root): {\"a\":1}\n"},
		{"type change", `{"a": [1]}`, `{"a": {"b": 1}}`, "~ a: [1] → {\"b\":1}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Diff(decode(t, tc.old), decode(t, tc.new)); got != tc.want {
				t.Fatalf("Diff =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestDiffLimit(t *testing.T) {
	t.Parallel()
	build := func(n int) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("k%03d", i)] = i
		}
		return m
	}
	at := Diff(map[string]any{}, build(MaxDiffLines))
	if n := strings.Count(at, "\n"); n != MaxDiffLines || strings.Contains(at, "more changes") {
		t.Fatalf("at the limit: %d lines", n)
	}
	past := Diff(map[string]any{}, build(MaxDiffLines+5))
	if n := strings.Count(past, "\n"); n != MaxDiffLines+1 || !strings.HasSuffix(past, "… and 5 more changes\n") {
		t.Fatalf("past the limit: %d lines, ends %q", n, past[len(past)-40:])
	}
}
