package merge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// decode turns a JSON test literal into a document; "" is absent (nil).
func decode(t *testing.T, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return v
}

type mergeCase struct {
	name                    string
	last, observed, desired string
	opts                    Options
	want                    string
	wantErr                 error
	wantErrText             string // a substring the error must contain
}

// metacontrollerCases is Metacontroller's own table
// (pkg/dynamic/apply/apply_test.go), unchanged.
var metacontrollerCases = []mergeCase{
	{name: "mc/empty", observed: `{}`, last: `{}`, desired: `{}`, want: `{}`},
	{
		name:     "mc/scalars",
		observed: `{"keep": "other", "remove": "other", "replace": "other"}`,
		last:     `{"remove": "old", "replace": "old"}`,
		desired:  `{"replace": "new", "add": "new"}`,
		want:     `{"replace": "new", "add": "new", "keep": "other"}`,
	},
	{
		name:     "mc/nested object",
		observed: `{"update": {"keep": "other", "remove": "other"}}`,
		last:     `{"update": {"remove": "old", "replace": "old"}}`,
		desired:  `{"update": {"replace": "new", "add": "new"}}`,
		want:     `{"update": {"replace": "new", "add": "new", "keep": "other"}}`,
	},
	{
		name:     "mc/replace list",
		observed: `{"list": [1,2,3,{"a":true}]}`,
		last:     `{"list": [4,5,6]}`,
		desired:  `{"list": [7,8,9,{"b":false}]}`,
		want:     `{"list": [7,8,9,{"b":false}]}`,
	},
	{
		name: "mc/merge list-map",
		observed: `{
			"listMap": [{"name": "keep", "value": "other"}, {"name": "remove", "value": "other"}, {"name": "merge", "nested": {"keep": "other"}}],
			"ports1": [{"port": 80, "keep": "other"}],
			"ports2": [{"containerPort": 80, "keep": "other"}]}`,
		last: `{
			"listMap": [{"name": "remove", "value": "old"}],
			"ports1": [{"port": 80, "remove": "old"}]}`,
		desired: `{
			"listMap": [{"name": "add", "value": "new"}, {"name": "merge", "nested": {"add": "new"}}],
			"ports1": [{"port": 80, "add": "new"}, {"port": 90}],
			"ports2": [{"containerPort": 80}, {"containerPort": 90}]}`,
		want: `{
			"listMap": [{"name": "keep", "value": "other"}, {"name": "merge", "nested": {"keep": "other", "add": "new"}}, {"name": "add", "value": "new"}],
			"ports1": [{"port": 80, "keep": "other", "add": "new"}, {"port": 90}],
			"ports2": [{"containerPort": 80, "keep": "other"}, {"containerPort": 90}]}`,
	},
	{
		name:     "mc/replace list of objects that's not a list-map",
		observed: `{"notListMap": [{"name": "keep", "value": "other"}, {"notName": "remove", "value": "other"}, {"name": "merge", "nested": {"keep": "other"}}]}`,
		last:     `{"notListMap": [{"name": "remove", "value": "old"}]}`,
		desired:  `{"notListMap": [{"name": "add", "value": "new"}, {"name": "merge", "nested": {"add": "new"}}]}`,
		want:     `{"notListMap": [{"name": "add", "value": "new"}, {"name": "merge", "nested": {"add": "new"}}]}`,
	},
}

var cases = []mergeCase{
	// Absent documents and records.
	{name: "observed absent takes desired", desired: `{"a": 1, "b": [1, 2]}`, want: `{"a": 1, "b": [1, 2]}`},
	{name: "observed absent drops desired nulls", desired: `{"a": 1, "b": null, "c": {"d": null}}`, want: `{"a": 1, "c": {}}`},
	{name: "observed absent with a stale record", last: `{"gone": 1}`, desired: `{"a": 1}`, want: `{"a": 1}`},
	{name: "no last-applied deletes nothing", observed: `{"a": 1, "b": 2}`, desired: `{"a": 3}`, want: `{"a": 3, "b": 2}`},
	{name: "desired equal to observed", last: `{"a": 1}`, observed: `{"a": 1, "z": 9}`, desired: `{"a": 1}`, want: `{"a": 1, "z": 9}`},
	{name: "root list atomic", observed: `[1, 2]`, desired: `[3]`, want: `[3]`},
	{name: "root list of named maps merges", last: `[{"name": "a"}]`, observed: `[{"name": "x"}, {"name": "a", "v": 1}]`, desired: `[{"name": "b"}]`, want: `[{"name": "x"}, {"name": "b"}]`},

	// Maps.
	{name: "deleted key only when we applied it", last: `{"a": 1}`, observed: `{"a": 1, "b": 2}`, desired: `{}`, want: `{"b": 2}`},
	{name: "deep delete keeps siblings", last: `{"x": {"y": {"z": 1}}}`, observed: `{"x": {"y": {"z": 1, "o": 2}}}`, desired: `{"x": {"y": {}}}`, want: `{"x": {"y": {"o": 2}}}`},
	{name: "removing a whole map we applied", last: `{"x": {"y": 1}}`, observed: `{"x": {"y": 1, "o": 2}, "k": 1}`, desired: `{}`, want: `{"k": 1}`},
	{name: "others change our field back", last: `{"a": 1}`, observed: `{"a": 5}`, desired: `{"a": 1}`, want: `{"a": 1}`},
	{name: "new nested map added to existing map", last: `{}`, observed: `{"o": 1}`, desired: `{"n": {"m": [1]}}`, want: `{"o": 1, "n": {"m": [1]}}`},

	// kubectl fixes.
	{name: "null in desired deletes a field others wrote", observed: `{"a": 1, "b": 2}`, desired: `{"a": null}`, want: `{"b": 2}`},
	{name: "null in desired deletes nested", last: `{"m": {}}`, observed: `{"m": {"a": 1, "b": 2}}`, desired: `{"m": {"b": null}}`, want: `{"m": {"a": 1}}`},
	{name: "null inside a new list item is dropped", observed: `{"l": []}`, desired: `{"l": [{"name": "a", "x": null}]}`, want: `{"l": [{"name": "a"}]}`},
	{name: "type change scalar to map", last: `{"a": 1}`, observed: `{"a": 1}`, desired: `{"a": {"b": 2}}`, want: `{"a": {"b": 2}}`},
	{name: "type change map to list", last: `{"a": {"b": 1}}`, observed: `{"a": {"b": 1, "c": 2}}`, desired: `{"a": [1]}`, want: `{"a": [1]}`},
	{name: "type change list to scalar", observed: `{"a": [{"name": "x"}]}`, desired: `{"a": "s"}`, want: `{"a": "s"}`},
	{name: "observed null field takes desired map", observed: `{"a": null}`, desired: `{"a": {"b": 1}}`, want: `{"a": {"b": 1}}`},
	{name: "last-applied of another type deletes nothing below", last: `{"a": [1]}`, observed: `{"a": {"o": 1}}`, desired: `{"a": {"b": 2}}`, want: `{"a": {"o": 1, "b": 2}}`},
	{name: "root type change", observed: `[1]`, desired: `{"a": 1}`, want: `{"a": 1}`},

	// Conventional associative lists.
	{name: "key precedence port over name", last: `{"l": [{"port": 1, "name": "a"}]}`, observed: `{"l": [{"port": 1, "name": "a", "o": 1}]}`, desired: `{"l": [{"port": 1, "name": "b"}]}`, want: `{"l": [{"port": 1, "name": "b", "o": 1}]}`},
	{name: "mountPath key", observed: `{"v": [{"mountPath": "/a", "ro": true}]}`, desired: `{"v": [{"mountPath": "/a", "name": "x"}, {"mountPath": "/b"}]}`, want: `{"v": [{"mountPath": "/a", "ro": true, "name": "x"}, {"mountPath": "/b"}]}`},
	{name: "uid key", last: `{"u": [{"uid": "1"}]}`, observed: `{"u": [{"uid": "1"}, {"uid": "2"}]}`, desired: `{"u": []}`, want: `{"u": [{"uid": "2"}]}`},
	{name: "ip key", observed: `{"h": [{"ip": "10.0.0.1", "h": ["a"]}]}`, desired: `{"h": [{"ip": "10.0.0.1", "h": ["b"]}]}`, want: `{"h": [{"ip": "10.0.0.1", "h": ["b"]}]}`},
	{name: "path key", observed: `{"p": [{"path": "/x", "o": 1}]}`, desired: `{"p": [{"path": "/y"}]}`, want: `{"p": [{"path": "/x", "o": 1}, {"path": "/y"}]}`},
	{name: "observed order kept, new appended in desired order", observed: `{"l": [{"name": "c"}, {"name": "a"}]}`, desired: `{"l": [{"name": "z"}, {"name": "a"}, {"name": "y"}]}`, want: `{"l": [{"name": "c"}, {"name": "a"}, {"name": "z"}, {"name": "y"}]}`},
	{name: "a scalar item makes a list atomic", observed: `{"l": [{"name": "a"}, "s"]}`, desired: `{"l": [{"name": "b"}]}`, want: `{"l": [{"name": "b"}]}`},
	{name: "a key missing in one last-applied item makes a list atomic", last: `{"l": [{"id": 1}]}`, observed: `{"l": [{"name": "a"}]}`, desired: `{"l": [{"name": "b"}]}`, want: `{"l": [{"name": "b"}]}`},
	{name: "keys compare numbers by value", last: `{"l": [{"port": 80.0}]}`, observed: `{"l": [{"port": 80, "o": 1}]}`, desired: `{"l": [{"port": 80, "n": 1}]}`, want: `{"l": [{"port": 80, "o": 1, "n": 1}]}`},
	{name: "empty desired list keeps others' items", last: `{"l": []}`, observed: `{"l": [{"name": "x"}]}`, desired: `{"l": []}`, want: `{"l": [{"name": "x"}]}`},
	{name: "all lists empty", observed: `{"l": []}`, desired: `{"l": []}`, want: `{"l": []}`},
	{name: "nested associative lists", last: `{"c": [{"name": "app", "ports": [{"containerPort": 80}]}]}`, observed: `{"c": [{"name": "app", "ports": [{"containerPort": 80}, {"containerPort": 9090}]}, {"name": "sidecar"}]}`, desired: `{"c": [{"name": "app", "ports": [{"containerPort": 81}]}]}`, want: `{"c": [{"name": "app", "ports": [{"containerPort": 9090}, {"containerPort": 81}]}, {"name": "sidecar"}]}`},
	{name: "duplicates in observed all merged", observed: `{"l": [{"name": "a", "x": 1}, {"name": "a", "x": 2}]}`, desired: `{"l": [{"name": "a", "y": 1}]}`, want: `{"l": [{"name": "a", "x": 1, "y": 1}, {"name": "a", "x": 2, "y": 1}]}`},

	// merge_keys.
	{
		name:     "multi-field merge key",
		opts:     Options{MergeKeys: map[string][]string{"listeners": {"port", "protocol"}}},
		last:     `{"listeners": [{"port": 53, "protocol": "udp"}, {"port": 53, "protocol": "tcp"}]}`,
		observed: `{"listeners": [{"port": 53, "protocol": "tcp", "o": 1}, {"port": 53, "protocol": "udp"}, {"port": 8, "protocol": "tcp"}]}`,
		desired:  `{"listeners": [{"port": 53, "protocol": "tcp", "n": 1}]}`,
		want:     `{"listeners": [{"port": 53, "protocol": "tcp", "o": 1, "n": 1}, {"port": 8, "protocol": "tcp"}]}`,
	},
	{
		name:     "unconventional merge key",
		opts:     Options{MergeKeys: map[string][]string{"users": {"login"}}},
		last:     `{"users": [{"login": "old"}]}`,
		observed: `{"users": [{"login": "old"}, {"login": "eve", "shell": "sh"}]}`,
		desired:  `{"users": [{"login": "eve", "home": "/e"}]}`,
		want:     `{"users": [{"login": "eve", "shell": "sh", "home": "/e"}]}`,
	},
	{
		name:     "merge key through nested lists (a list level adds no segment)",
		opts:     Options{MergeKeys: map[string][]string{"spec.containers.ports": {"port", "protocol"}}},
		observed: `{"spec": {"containers": [{"name": "a", "ports": [{"port": 1, "protocol": "tcp", "o": 1}]}]}}`,
		desired:  `{"spec": {"containers": [{"name": "a", "ports": [{"port": 1, "protocol": "udp"}]}]}}`,
		want:     `{"spec": {"containers": [{"name": "a", "ports": [{"port": 1, "protocol": "tcp", "o": 1}, {"port": 1, "protocol": "udp"}]}]}}`,
	},
	{
		name:        "explicit key missing in desired item",
		opts:        Options{MergeKeys: map[string][]string{"listeners": {"port", "protocol"}}},
		observed:    `{"listeners": []}`,
		desired:     `{"listeners": [{"port": 80}]}`,
		wantErr:     ErrMissingKey,
		wantErrText: `listeners: item has no merge key "protocol": {"port":80}`,
	},
	{
		name:        "explicit key missing in observed item",
		opts:        Options{MergeKeys: map[string][]string{"a.l": {"id"}}},
		observed:    `{"a": {"l": [{"id": 1}, {"x": 2}]}}`,
		desired:     `{"a": {"l": [{"id": 1}]}}`,
		wantErr:     ErrMissingKey,
		wantErrText: `a.l: item has no merge key "id": {"x":2}`,
	},
	{
		name:        "explicit key missing when creating",
		opts:        Options{MergeKeys: map[string][]string{"l": {"id"}}},
		desired:     `{"l": [{"x": 1}]}`,
		wantErr:     ErrMissingKey,
		wantErrText: `l: item has no merge key "id"`,
	},
	{
		name:        "explicit key on a scalar item",
		opts:        Options{MergeKeys: map[string][]string{"l": {"id"}}},
		observed:    `{"l": [1]}`,
		desired:     `{"l": [{"id": 1}]}`,
		wantErr:     ErrNotObject,
		wantErrText: `l: item is not a map: 1`,
	},
	{
		name:        "duplicate key in desired",
		opts:        Options{MergeKeys: map[string][]string{"l": {"id"}}},
		observed:    `{"l": []}`,
		desired:     `{"l": [{"id": 1}, {"id": 1, "x": 2}]}`,
		wantErr:     ErrDuplicateKey,
		wantErrText: `l: duplicate merge key in desired: {"id":1,"x":2}`,
	},
	{name: "merge_keys on a map", opts: Options{MergeKeys: map[string][]string{"m": {"id"}}}, observed: `{"m": {}}`, desired: `{"m": {"id": 1}}`, wantErr: ErrNotList, wantErrText: "m: value is not a list"},

	// atomic.
	{name: "atomic list of named maps", opts: Options{Atomic: []string{"spec.args"}}, observed: `{"spec": {"args": [{"name": "a"}, {"name": "o"}]}}`, desired: `{"spec": {"args": [{"name": "b"}]}}`, want: `{"spec": {"args": [{"name": "b"}]}}`},
	{name: "atomic map", opts: Options{Atomic: []string{"labels"}}, observed: `{"labels": {"o": "1", "a": "2"}}`, desired: `{"labels": {"a": "3"}}`, want: `{"labels": {"a": "3"}}`},
	{name: "atomic root", opts: Options{Atomic: []string{""}}, observed: `{"o": 1}`, desired: `{"a": 1}`, want: `{"a": 1}`},

	// sets.
	{
		name:     "set merge",
		opts:     Options{Sets: []string{"metadata.finalizers"}},
		last:     `{"metadata": {"finalizers": ["ours", "kept"]}}`,
		observed: `{"metadata": {"finalizers": ["theirs", "ours", "kept", "theirs"]}}`,
		desired:  `{"metadata": {"finalizers": ["kept", "new", "new"]}}`,
		want:     `{"metadata": {"finalizers": ["theirs", "kept", "new"]}}`,
	},
	{name: "set created deduplicated", opts: Options{Sets: []string{"s"}}, desired: `{"s": [1, 2, 1]}`, want: `{"s": [1, 2]}`},
	{name: "set of numbers by value", opts: Options{Sets: []string{"s"}}, last: `{"s": [1]}`, observed: `{"s": [1.0, 2]}`, desired: `{"s": [2]}`, want: `{"s": [2]}`},
	{name: "set with a map item", opts: Options{Sets: []string{"s"}}, observed: `{"s": [{"a": 1}]}`, desired: `{"s": ["x"]}`, wantErr: ErrNotScalar, wantErrText: `s: set item is not a scalar: {"a":1}`},
	{name: "set on a scalar", opts: Options{Sets: []string{"s"}}, observed: `{"s": []}`, desired: `{"s": "x"}`, wantErr: ErrNotList},

	// Options validation.
	{name: "atomic and sets conflict", opts: Options{Atomic: []string{"a"}, Sets: []string{"a"}}, desired: `{}`, wantErr: ErrConflictingOptions, wantErrText: `path "a" is in both atomic and sets`},
	{name: "merge_keys and atomic conflict", opts: Options{MergeKeys: map[string][]string{"a": {"k"}}, Atomic: []string{"a"}}, desired: `{}`, wantErr: ErrConflictingOptions, wantErrText: `path "a" is in both merge_keys and atomic`},
	{name: "merge_keys and sets conflict", opts: Options{MergeKeys: map[string][]string{"a": {"k"}}, Sets: []string{"a"}}, desired: `{}`, wantErr: ErrConflictingOptions},
	{name: "empty merge key list", opts: Options{MergeKeys: map[string][]string{"a": {}}}, desired: `{}`, wantErr: ErrConflictingOptions, wantErrText: `merge_keys "a": no key fields`},
	{name: "repeated merge key field", opts: Options{MergeKeys: map[string][]string{"a": {"k", "k"}}}, desired: `{}`, wantErr: ErrConflictingOptions, wantErrText: `key field "k" repeated`},

	// Errors of the documents themselves.
	{name: "null desired document", observed: `{}`, desired: `null`, wantErr: ErrNullDesired},
}

func TestMerge(t *testing.T) {
	t.Parallel()
	all := append(append([]mergeCase{}, metacontrollerCases...), cases...)
	if len(all) < 40 {
		t.Fatalf("only %d cases", len(all))
	}
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			last, observed, desired := decode(t, tc.last), decode(t, tc.observed), decode(t, tc.desired)
			snapshot := compact([]any{last, observed, desired})
			got, err := Merge(last, observed, desired, tc.opts)
			if after := compact([]any{last, observed, desired}); after != snapshot {
				t.Fatalf("Merge modified its arguments:\nbefore %s\nafter  %s", snapshot, after)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("err = %q, want it to contain %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			want := decode(t, tc.want)
			// Order matters in lists: compare the canonical JSON (maps sorted).
			if compact(got) != compact(want) {
				t.Fatalf("Merge =\n  %s\nwant\n  %s", compact(got), compact(want))
			}
			// Merging the result again with the same desired state (now also
			// the last-applied) changes nothing.
			again, err := Merge(desired, got, desired, tc.opts)
			if err != nil {
				t.Fatalf("second Merge: %v", err)
			}
			if !Equal(again, got) {
				t.Fatalf("second Merge not stable:\n  %s\nthen\n  %s", compact(got), compact(again))
			}
		})
	}
}

func TestMaxDepth(t *testing.T) {
	t.Parallel()
	nest := func(n int) any {
		var v any = "leaf"
		for range n {
			v = map[string]any{"k": v}
		}
		return v
	}
	for _, observed := range []any{nil, nest(MaxDepth)} {
		if _, err := Merge(nil, observed, nest(MaxDepth), Options{}); err != nil {
			t.Fatalf("at the limit (%d levels): %v", MaxDepth, err)
		}
		_, err := Merge(nil, observed, nest(MaxDepth+1), Options{})
		if !errors.Is(err, ErrTooDeep) {
			t.Fatalf("past the limit: err = %v, want ErrTooDeep", err)
		}
	}
}

func TestValidateAcceptsDisjointOptions(t *testing.T) {
	t.Parallel()
	o := Options{MergeKeys: map[string][]string{"a": {"x", "y"}}, Atomic: []string{"b", "b"}, Sets: []string{"c"}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}
