package coordinator_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/schemas"
)

func TestMergeData(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		base, over map[string]any
		want       map[string]any
	}{
		{name: "both empty", want: map[string]any{}},
		{name: "base only", base: map[string]any{"port": 8080}, want: map[string]any{"port": 8080}},
		{name: "override wins", base: map[string]any{"port": 8080}, over: map[string]any{"port": 9090},
			want: map[string]any{"port": 9090}},
		{name: "new keys are added", base: map[string]any{"a": 1}, over: map[string]any{"b": 2},
			want: map[string]any{"a": 1, "b": 2}},
		{
			name: "maps merge deeply",
			base: map[string]any{"app": map[string]any{"port": 8080, "tls": map[string]any{"on": false, "cert": "/c"}}},
			over: map[string]any{"app": map[string]any{"tls": map[string]any{"on": true}}},
			want: map[string]any{"app": map[string]any{"port": 8080, "tls": map[string]any{"on": true, "cert": "/c"}}},
		},
		{
			name: "a scalar replaces a map",
			base: map[string]any{"app": map[string]any{"port": 8080}},
			over: map[string]any{"app": "off"},
			want: map[string]any{"app": "off"},
		},
		{
			name: "a map replaces a scalar",
			base: map[string]any{"app": "off"},
			over: map[string]any{"app": map[string]any{"port": 1}},
			want: map[string]any{"app": map[string]any{"port": 1}},
		},
		{
			name: "lists are replaced, not merged",
			base: map[string]any{"hosts": []any{"a", "b"}},
			over: map[string]any{"hosts": []any{"c"}},
			want: map[string]any{"hosts": []any{"c"}},
		},
		{
			name: "an explicit nil override wins",
			base: map[string]any{"a": 1},
			over: map[string]any{"a": nil},
			want: map[string]any{"a": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, coordinator.MergeData(tt.base, tt.over))
		})
	}
}

// TestMergeDataCopies proves the result shares nothing with its inputs, so a
// run's data never leaks into the manifest or into another run.
func TestMergeDataCopies(t *testing.T) {
	t.Parallel()
	base := map[string]any{"app": map[string]any{"hosts": []any{"a"}}}
	over := map[string]any{"extra": map[string]any{"k": "v"}}
	got := coordinator.MergeData(base, over)
	got["app"].(map[string]any)["hosts"].([]any)[0] = "mutated"
	got["app"].(map[string]any)["new"] = 1
	got["extra"].(map[string]any)["k"] = "mutated"
	require.Equal(t, map[string]any{"app": map[string]any{"hosts": []any{"a"}}}, base)
	require.Equal(t, map[string]any{"extra": map[string]any{"k": "v"}}, over)
}

func parse(t *testing.T, src string) *schemas.Manifest {
	t.Helper()
	m, err := schemas.Parse("m.yaml", []byte(src))
	require.NoError(t, err)
	return m
}

func TestPrepare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		manifest  string
		overrides map[string]any
		// check inspects a successful plan.
		check func(t *testing.T, p *coordinator.Plan)
		// wantErr are substrings of the error; nil means success.
		wantErr []string
	}{
		{
			name: "overrides win over manifest data, deeply",
			manifest: `
data: {port: 8080, app: {user: app, group: app}}
resources:
  - {type: exec, name: "run-{{ lookup('data.port') }}", command: /bin/true}
`,
			overrides: map[string]any{"port": 9090, "app": map[string]any{"group": "staff"}},
			check: func(t *testing.T, p *coordinator.Plan) {
				require.Equal(t, map[string]any{"port": 9090, "app": map[string]any{"user": "app", "group": "staff"}}, p.Data)
				require.Equal(t, "run-9090", p.Manifest.Resources[0].Name)
			},
		},
		{
			name: "names, aliases and references are rendered from data",
			manifest: `
data: {dir: /srv/app, svc: web}
ordering: graph
resources:
  - {type: file, name: "{{ lookup('data.dir') }}/app.conf", alias: "{{ lookup('data.svc') }}-conf", content: x}
  - type: exec
    name: "reload-${ lookup('data.svc') }"
    command: /bin/true
    require: ["file#{{ lookup('data.dir') }}/app.conf"]
    subscribe: ["file#{{ lookup('data.svc') }}-conf"]
`,
			check: func(t *testing.T, p *coordinator.Plan) {
				r := p.Manifest.Resources
				require.Equal(t, "/srv/app/app.conf", r[0].Name)
				require.Equal(t, "web-conf", r[0].Alias)
				require.Equal(t, "reload-web", r[1].Name)
				require.Equal(t, []string{"file#/srv/app/app.conf"}, r[1].Require)
				require.Equal(t, []string{"file#web-conf"}, r[1].Subscribe)
				require.Equal(t, [][]int{nil, {0}}, p.Requires)
				require.Equal(t, [][]int{nil, {0}}, p.Subscribes)
			},
		},
		{
			name: "overrides change rendered names",
			manifest: `
data: {dir: /srv/app}
resources:
  - {type: file, name: "{{ lookup('data.dir') }}/a", content: x}
  - {type: exec, name: r, command: /bin/true, require: ["file#{{ lookup('data.dir') }}/a"]}
`,
			overrides: map[string]any{"dir": "/opt/app"},
			check: func(t *testing.T, p *coordinator.Plan) {
				require.Equal(t, "/opt/app/a", p.Manifest.Resources[0].Name)
				require.Equal(t, []string{"file#/opt/app/a"}, p.Manifest.Resources[1].Require)
			},
		},
		{
			name: "a reference unknown once rendered is an error with its position",
			manifest: `
data: {target: nope}
resources:
  - {type: exec, name: a, command: /bin/true}
  - {type: exec, name: b, command: /bin/true, require: ["exec#{{ lookup('data.target') }}"]}
`,
			wantErr: []string{"m.yaml:5:", "require exec#nope: unknown resource"},
		},
		{
			name: "a name template with a missing key is an error naming the resource",
			manifest: `
resources:
  - {type: exec, name: "run-{{ lookup('data.missing') }}", command: /bin/true}
`,
			wantErr: []string{"m.yaml:3:", ".name", "data.missing"},
		},
		{
			name: "names equal once rendered are duplicates",
			manifest: `
data: {a: x, b: x}
resources:
  - {type: exec, name: "{{ lookup('data.a') }}", command: /bin/true}
  - {type: exec, name: "{{ lookup('data.b') }}", command: /bin/true}
`,
			wantErr: []string{"m.yaml:5:", "duplicate resource exec#x"},
		},
		{
			name: "manifest ordering chains every resource to the previous one",
			manifest: `
resources:
  - {type: exec, name: a, command: /bin/true}
  - {type: exec, name: b, command: /bin/true}
  - {type: exec, name: c, command: /bin/true, require: [exec#a], subscribe: [exec#b]}
`,
			check: func(t *testing.T, p *coordinator.Plan) {
				require.Equal(t, []int{-1, 0, 1}, p.After)
				require.Equal(t, [][]int{nil, nil, {0}}, p.Requires)
				require.Equal(t, [][]int{nil, nil, {1}}, p.Subscribes)
			},
		},
		{
			name: "graph ordering has only explicit edges, forward references allowed",
			manifest: `
ordering: graph
resources:
  - {type: exec, name: a, command: /bin/true, require: [exec#c]}
  - {type: exec, name: b, command: /bin/true}
  - {type: exec, name: c, command: /bin/true, subscribe: [exec#b]}
`,
			check: func(t *testing.T, p *coordinator.Plan) {
				require.Equal(t, []int{-1, -1, -1}, p.After)
				require.Equal(t, [][]int{{2}, nil, nil}, p.Requires)
				require.Equal(t, [][]int{nil, nil, {1}}, p.Subscribes)
			},
		},
		{
			name: "a relative file path fails before the run, naming resource and position",
			manifest: `
data: {dir: relative/dir}
resources:
  - {type: exec, name: ok, command: /bin/true}
  - {type: file, name: "{{ lookup('data.dir') }}/app.conf", content: x}
`,
			wantErr: []string{"m.yaml:5:", "relative/dir/app.conf", "must be an absolute path"},
		},
		{
			name: "a missing data key in a property fails before the run",
			manifest: `
resources:
  - {type: file, name: /tmp/x, content: "port={{ lookup('data.port') }}"}
`,
			wantErr: []string{"m.yaml:3:", "data.port"},
		},
		{
			name: "a data key with a default is fine",
			manifest: `
resources:
  - {type: file, name: /tmp/x, content: "port={{ lookup('data.port', 80) }}"}
`,
			check: func(t *testing.T, p *coordinator.Plan) {
				// Properties are rendered on the worker, not here.
				require.Equal(t, "port={{ lookup('data.port', 80) }}", p.Manifest.Resources[0].Properties["content"])
			},
		},
		{
			name: "a fact in a property is left for the worker",
			manifest: `
resources:
  - {type: file, name: /tmp/x, content: "{{ lookup('facts.host.name') }}"}
`,
			check: func(t *testing.T, p *coordinator.Plan) {},
		},
		{
			name: "a bad exec property fails before the run",
			manifest: `
resources:
  - {type: exec, name: bad, command: "/bin/echo 'unterminated"}
`,
			wantErr: []string{"m.yaml:3:", "command"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := coordinator.Prepare(parse(t, tt.manifest), tt.overrides)
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, want := range tt.wantErr {
					require.Contains(t, err.Error(), want)
				}
				var se *schemas.Error
				require.True(t, errors.As(err, &se), "error %T is not a *schemas.Error", err)
				require.NotZero(t, se.Pos.Line)
				return
			}
			require.NoError(t, err)
			tt.check(t, p)
		})
	}
}
