package document

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/merge"
)

type testBundle struct {
	dir   string
	store *FileStore
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{dir: publicDir(t), store: &FileStore{Dir: t.TempDir(), Host: "host1"}}
}

// publicDir is a t.TempDir() that other users can reach, as /etc is (the
// test's temporary directories are 0700): diffs of world-readable
// documents in it are shown.
func publicDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func (b *testBundle) doc(t *testing.T, name string, props map[string]any) *Document {
	t.Helper()
	res, err := NewFactory(Config{StateDir: filepath.Join(b.dir, "unused-state")})(resources.Spec{Type: Type, Name: name, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return res.(*Document)
}

func (b *testBundle) run(t *testing.T, d *Document, noop bool) resources.Outcome {
	t.Helper()
	return resources.Execute(context.Background(), d, &resources.Env{Noop: noop, State: b.store})
}

func (b *testBundle) path(name string) string { return filepath.Join(b.dir, name) }

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readJSON(t *testing.T, path string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(read(t, path)), &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func jsonOf(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func content(t *testing.T, s string) map[string]any {
	t.Helper()
	return map[string]any{"content": jsonOf(t, s)}
}

func wantStatus(t *testing.T, out resources.Outcome, want resources.Status) {
	t.Helper()
	if out.Status != want {
		t.Fatalf("status %q (%s, err %v), want %q\n%s", out.Status, out.Message, out.Err, want, out.Diff)
	}
}

func TestJSONLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("config.json")
	v1 := content(t, `{"log": {"level": "info", "color": true}, "listeners": [{"port": 8080, "protocol": "tcp"}]}`)

	// First apply creates the file.
	out := b.run(t, b.doc(t, path, v1), false)
	wantStatus(t, out, resources.StatusChanged)
	if out.Message != "created" || !strings.Contains(out.Diff, "+ (root)") {
		t.Fatalf("first apply: %q\n%s", out.Message, out.Diff)
	}
	if got := readJSON(t, path); !merge.Equal(got, v1["content"]) {
		t.Fatalf("content %v", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Fatalf("new file mode %v, want 0644", fi.Mode())
	}

	// Second apply is stable.
	wantStatus(t, b.run(t, b.doc(t, path, v1), false), resources.StatusStable)

	// Another writer adds a field, a nested field and a list item.
	write(t, path, `{"log": {"level": "info", "color": true, "file": "/var/log/app"}, "cache": 64,
	  "listeners": [{"port": 8080, "protocol": "tcp"}, {"port": 9090, "protocol": "tcp", "admin": true}]}`)
	wantStatus(t, b.run(t, b.doc(t, path, v1), false), resources.StatusStable)

	// We change the level, drop color and add a listener: theirs stay.
	v2 := content(t, `{"log": {"level": "warn"}, "listeners": [{"port": 8080, "protocol": "tcp"}, {"port": 8443, "protocol": "tcp"}]}`)
	out = b.run(t, b.doc(t, path, v2), false)
	wantStatus(t, out, resources.StatusChanged)
	want := jsonOf(t, `{"log": {"level": "warn", "file": "/var/log/app"}, "cache": 64,
	  "listeners": [{"port": 8080, "protocol": "tcp"}, {"port": 9090, "protocol": "tcp", "admin": true}, {"port": 8443, "protocol": "tcp"}]}`)
	if got := readJSON(t, path); !merge.Equal(got, want) {
		t.Fatalf("after v2: %s", read(t, path))
	}
	if out.Message != "updated 3 fields" {
		t.Fatalf("message %q\n%s", out.Message, out.Diff)
	}
	for _, line := range []string{`- log.color: true`, `~ log.level: "info" → "warn"`, `+ listeners[port=8443]: {"port":8443,"protocol":"tcp"}`} {
		if !strings.Contains(out.Diff, line) {
			t.Fatalf("diff lacks %q:\n%s", line, out.Diff)
		}
	}
	// Key order of the file is kept: log first, cache second, as written.
	if s := read(t, path); strings.Index(s, `"log"`) > strings.Index(s, `"cache"`) || strings.Index(s, `"cache"`) > strings.Index(s, `"listeners"`) {
		t.Fatalf("key order lost:\n%s", s)
	}
	wantStatus(t, b.run(t, b.doc(t, path, v2), false), resources.StatusStable)
}

func TestJSONKeepsLayout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("daemon.json")
	write(t, path, "{\n    \"zeta\": 1.50,\n    \"alpha\": {\"b\": \"<x>\"},\n    \"mid\": [1, 2]\n}\n")
	wantStatus(t, b.run(t, b.doc(t, path, content(t, `{"new": true}`)), false), resources.StatusChanged)
	want := "{\n    \"zeta\": 1.50,\n    \"alpha\": {\n        \"b\": \"<x>\"\n    },\n    \"mid\": [\n        1,\n        2\n    ],\n    \"new\": true\n}\n"
	if got := read(t, path); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestYAMLKeepsCommentsAndOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("app.yaml")
	write(t, path, `# Application settings, edited by hand too.
server:
  # where we listen
  port: 8080 # the public port
  host: 0.0.0.0
logging:
  level: debug  # noisy while testing
  targets: [stdout]
zz_theirs: kept
`)
	d := b.doc(t, path, map[string]any{"content": "server:\n  port: 9090\nlogging:\n  level: debug\n"})
	out := b.run(t, d, false)
	wantStatus(t, out, resources.StatusChanged)
	want := `# Application settings, edited by hand too.
server:
  # where we listen
  port: 9090 # the public port
  host: 0.0.0.0
logging:
  level: debug # noisy while testing
  targets: [stdout]
zz_theirs: kept
`
	if got := read(t, path); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	wantStatus(t, b.run(t, d, false), resources.StatusStable)
}

func TestFieldRemovedFromDesiredIsDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("c.yaml")
	write(t, path, "theirs: 1\n")
	wantStatus(t, b.run(t, b.doc(t, path, content(t, `{"a": 1, "b": {"c": 2, "d": 3}, "s": ["x"]}`)), false), resources.StatusChanged)
	out := b.run(t, b.doc(t, path, content(t, `{"b": {"c": 2}}`)), false)
	wantStatus(t, out, resources.StatusChanged)
	if got := read(t, path); got != "theirs: 1\nb:\n  c: 2\n" {
		t.Fatalf("got\n%s", got)
	}
}

func TestNoopWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("n.json")
	write(t, path, `{"a": 1}`)
	before, _ := os.Stat(path)
	out := b.run(t, b.doc(t, path, content(t, `{"a": 2}`)), true)
	wantStatus(t, out, resources.StatusChanged)
	if !out.Noop || out.Message != "would update 1 field" || out.Diff != "~ a: 1 → 2\n" {
		t.Fatalf("noop outcome %+v", out)
	}
	after, _ := os.Stat(path)
	if read(t, path) != `{"a": 1}` || !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("noop wrote the file")
	}
	if _, ok, _ := b.store.Get(context.Background(), "document#"+path); ok {
		t.Fatal("noop wrote the last-applied store")
	}
	// A converged document in noop does not record last-applied either.
	out = b.run(t, b.doc(t, path, content(t, `{"a": 1}`)), true)
	wantStatus(t, out, resources.StatusStable)
	if _, ok, _ := b.store.Get(context.Background(), "document#"+path); ok {
		t.Fatal("noop recorded last-applied")
	}
	entries, _ := os.ReadDir(b.dir)
	if len(entries) != 1 {
		t.Fatalf("noop left files: %v", entries)
	}
}

func TestCorruptFileFailsUntouched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, data, want string }{
		{"broken.json", "{\n  \"a\": 1,\n  \"b\": oops\n}\n", ":3: invalid character 'o'"},
		{"truncated.json", "{\n  \"a\": [1,\n", ":3: unexpected EOF"},
		{"trailing.json", "{}\n{}\n", ":2: data after the top-level value"},
		{"broken.yaml", "a: 1\nb: 2\n  c: 3\n", ":3: mapping values are not allowed in this context"},
		{"tabs.yaml", "a:\n\tb: 1\n", ":2: found character that cannot start any token"},
		{"multi.yaml", "a: 1\n---\nb: 2\n", ":2: more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			path := b.path(tc.name)
			write(t, path, tc.data)
			out := b.run(t, b.doc(t, path, content(t, `{"a": 2}`)), false)
			wantStatus(t, out, resources.StatusFailed)
			var pe *ParseError
			if !errors.As(out.Err, &pe) || pe.File != path {
				t.Fatalf("err %v, want a *ParseError naming %s", out.Err, path)
			}
			if !strings.Contains(out.Err.Error(), path+tc.want) {
				t.Fatalf("err %q, want %q", out.Err, path+tc.want)
			}
			if read(t, path) != tc.data {
				t.Fatal("a corrupt file was overwritten")
			}
			if entries, _ := os.ReadDir(b.dir); len(entries) != 1 {
				t.Fatalf("left files behind: %v", entries)
			}
		})
	}
}

func TestLostStoreDeletesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("l.json")
	ctx := context.Background()
	wantStatus(t, b.run(t, b.doc(t, path, content(t, `{"a": 1, "b": 2}`)), false), resources.StatusChanged)
	if err := b.store.Delete(ctx, "document#"+path); err != nil {
		t.Fatal(err)
	}
	// With no record, b is not known to be ours: first-apply semantics.
	wantStatus(t, b.run(t, b.doc(t, path, content(t, `{"a": 1}`)), false), resources.StatusStable)
	if got := readJSON(t, path); !merge.Equal(got, jsonOf(t, `{"a": 1, "b": 2}`)) {
		t.Fatalf("a lost record deleted fields: %v", got)
	}
	// That stable run recorded {"a": 1}; from now on a is ours again.
	raw, ok, err := b.store.Get(ctx, "document#"+path)
	if err != nil || !ok || string(raw) != `{"a":1}` {
		t.Fatalf("record %q %v %v", raw, ok, err)
	}
	wantStatus(t, b.run(t, b.doc(t, path, content(t, `{"c": 3}`)), false), resources.StatusChanged)
	if got := readJSON(t, path); !merge.Equal(got, jsonOf(t, `{"b": 2, "c": 3}`)) {
		t.Fatalf("got %v", got)
	}

	// An unreadable record counts as lost.
	if err := b.store.Put(ctx, "document#"+path, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, b.run(t, b.doc(t, path, content(t, `{"d": 4}`)), false), resources.StatusChanged)
	if got := readJSON(t, path); !merge.Equal(got, jsonOf(t, `{"b": 2, "c": 3, "d": 4}`)) {
		t.Fatalf("got %v", got)
	}
}

func TestFallbackFileStore(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "f.json")
	res, err := NewFactory(Config{StateDir: state, Host: "web-1"})(resources.Spec{Type: Type, Name: path, Properties: content(t, `{"a": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, resources.Execute(context.Background(), res, nil), resources.StatusChanged)
	got, err := os.ReadFile(filepath.Join(state, "web-1", "document%23"+strings.ReplaceAll(path, "/", "%2F")+".json"))
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("fallback record %q: %v", got, err)
	}
}

func TestFileStoreLongKeys(t *testing.T) {
	t.Parallel()
	s := &FileStore{Dir: t.TempDir(), Host: "h"}
	ctx := context.Background()
	long := "document#/" + strings.Repeat("x", 300)
	if err := s.Put(ctx, long, []byte("1")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get(ctx, long); err != nil || !ok || string(v) != "1" {
		t.Fatalf("%q %v %v", v, ok, err)
	}
	if err := s.Delete(ctx, long); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(ctx, long); ok {
		t.Fatal("deleted key still there")
	}
	if err := s.Delete(ctx, long); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
}

func TestSettleRecordsConvergedDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("s.json")
	write(t, path, `{"a": 1, "theirs": 0}`)
	wantStatus(t, b.run(t, b.doc(t, path, content(t, `{"a": 1}`)), false), resources.StatusStable)
	if raw, ok, _ := b.store.Get(context.Background(), "document#"+path); !ok || string(raw) != `{"a":1}` {
		t.Fatalf("record %q", raw)
	}
	if read(t, path) != `{"a": 1, "theirs": 0}` {
		t.Fatal("a converged document was rewritten")
	}
}

func TestModeAndOwnership(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := b.path("m.json")
	write(t, path, `{"a": 1}`)
	props := content(t, `{"a": 1}`)
	props["mode"] = "0600"
	out := b.run(t, b.doc(t, path, props), false)
	wantStatus(t, out, resources.StatusChanged)
	if out.Message != "set mode 0644 → 0600" {
		t.Fatalf("message %q", out.Message)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// A content change keeps the mode.
	props = content(t, `{"a": 2}`)
	wantStatus(t, b.run(t, b.doc(t, path, props), false), resources.StatusChanged)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after rewrite %v", fi.Mode())
	}
}

func TestContentForms(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, c := range []any{
		`{"a": [1, 2]}`,
		"a:\n  - 1\n  - 2\n",
		map[string]any{"a": []any{1, 2}},
	} {
		path := b.path("c" + string(rune('0'+i)) + ".json")
		wantStatus(t, b.run(t, b.doc(t, path, map[string]any{"content": c}), false), resources.StatusChanged)
		if got := readJSON(t, path); !merge.Equal(got, jsonOf(t, `{"a": [1, 2]}`)) {
			t.Fatalf("content %#v: %v", c, got)
		}
	}
	// A root list.
	path := b.path("list.yaml")
	wantStatus(t, b.run(t, b.doc(t, path, map[string]any{"content": []any{map[string]any{"name": "a"}}}), false), resources.StatusChanged)
	if got := read(t, path); got != "- name: a\n" {
		t.Fatalf("got %q", got)
	}
}

func TestDocumentSizeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fill := func(n int) string { // a JSON document of exactly n bytes
		return `{"x":"` + strings.Repeat("y", n-len(`{"x":""}`)) + `"}`
	}
	at := b.path("at.json")
	write(t, at, fill(MaxDocumentBytes))
	wantStatus(t, b.run(t, b.doc(t, at, content(t, `{"x": "small"}`)), false), resources.StatusChanged)

	past := b.path("past.json")
	write(t, past, fill(MaxDocumentBytes+1))
	out := b.run(t, b.doc(t, past, content(t, `{"x": "small"}`)), false)
	if !errors.Is(out.Err, ErrTooLarge) || !strings.Contains(out.Err.Error(), past) {
		t.Fatalf("err %v, want ErrTooLarge naming the file", out.Err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, docName string
		props         map[string]any
		provider      string
		want          string
	}{
		{"no content", "/etc/a.json", map[string]any{}, "", "content: required"},
		{"scalar content", "/etc/a.json", map[string]any{"content": 3}, "", "content: must be a map or a list"},
		{"unparsable content", "/etc/a.json", map[string]any{"content": "a: [1"}, "", "content: line 1: did not find expected"},
		{"relative path", "etc/a.json", map[string]any{"content": map[string]any{}}, "", "must be an absolute path or kv://bucket/key"},
		{"unknown extension", "/etc/a.conf", map[string]any{"content": map[string]any{}}, "", `format: cannot tell from the name "/etc/a.conf"`},
		{"bad format", "/etc/a.conf", map[string]any{"content": map[string]any{}, "format": "toml"}, "", `format "toml": must be json or yaml`},
		{"conflicting options", "/etc/a.json", map[string]any{"content": map[string]any{}, "atomic": []any{"a"}, "sets": []any{"a"}}, "", `path "a" is in both atomic and sets`},
		{"content breaks merge_keys", "/etc/a.json", map[string]any{"content": map[string]any{"l": []any{map[string]any{"x": 1}}}, "merge_keys": map[string]any{"l": []any{"id"}}}, "", `content: l: item has no merge key "id": {"x":1}`},
		{"kv with mode", "kv://b/k", map[string]any{"content": map[string]any{}, "mode": "0644"}, "", "mode, owner and group apply to files"},
		{"kv bad bucket", "kv://b.x/k", map[string]any{"content": map[string]any{}}, "", `bucket "b.x"`},
		{"kv no key", "kv://b", map[string]any{"content": map[string]any{}}, "", `key ""`},
		{"provider mismatch", "/etc/a.json", map[string]any{"content": map[string]any{}}, "kv", `provider "kv": name "/etc/a.json" needs provider "file"`},
		{"bad mode", "/etc/a.json", map[string]any{"content": map[string]any{}, "mode": "999"}, "", `mode "999"`},
		{"unknown property", "/etc/a.json", map[string]any{"content": map[string]any{}, "merge_key": map[string]any{}}, "", `unknown property "merge_key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewFactory(Config{})(resources.Spec{Type: Type, Name: tc.docName, Provider: tc.provider, Properties: tc.props})
			if err == nil {
				res, _ := NewFactory(Config{})(resources.Spec{Type: Type, Name: tc.docName, Provider: tc.provider, Properties: tc.props})
				err = res.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
