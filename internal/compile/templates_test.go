package compile

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// A template syntax error in the third resource, wherever it is, fails
// the compilation (validate, apply) before anything runs, naming the
// resource, its line and property.
func TestTemplateSyntaxErrorsFailBeforeTheRun(t *testing.T) {
	t.Parallel()
	const head = `resources:
  - file:
      - /tmp/first:
          content: "one"
      - /tmp/second:
          content: "two"
`
	for name, tc := range map[string]struct {
		third string
		files map[string]string
		want  string
	}{
		"inline jet": {third: `  - file:
      - /tmp/third:
          content: "{{ jet('[[ if ]]') }}"
`, want: "template: jet: inline"},
		"inline template": {third: `  - file:
      - /tmp/third:
          content: "{{ template('{{ 1 + }}') }}"
`, want: `expression "1 +"`},
		"jet file": {third: `  - file:
      - /tmp/third:
          content: "{{ jet('t/app.jet') }}"
`, files: map[string]string{"t/app.jet": "ok\n[[ range ]]\n"}, want: "template: jet: t/app.jet"},
		"templ file": {third: `  - file:
      - /tmp/third:
          content: "{{ template('t/app.templ') }}"
`, files: map[string]string{"t/app.templ": "port={{ lookup('data.port' }}"}, want: "t/app.templ"},
		"goss_rules key": {third: `  - exec:
      - /bin/true:
          health_checks:
            - goss_rules:
                file:
                  "/etc/{{ lookup('data.x' }}": {exists: true}
`, want: "goss_rules.file"},
		"goss_rules file": {third: `  - exec:
      - /bin/true:
          health_checks:
            - goss_rules:
                file:
                  /etc/motd: {contents: ["{{ template('t/motd.templ') }}"]}
`, files: map[string]string{"t/motd.templ": "{{ 1 + }}"}, want: "t/motd.templ"},
		"scaffold jet": {third: `  - scaffold:
      - /tmp/third:
          source: tpl
`, files: map[string]string{"tpl/a.conf": "ok", "tpl/b.conf": "[[ if ]]"}, want: "b.conf"},
		"scaffold go": {third: `  - scaffold:
      - /tmp/third:
          source: tpl
          engine: go
`, files: map[string]string{"tpl/a.conf": "{{ .data.x }", "tpl/b.conf": "ok"}, want: "a.conf"},
		"scaffold source outside": {third: `  - scaffold:
      - /tmp/third:
          source: ../elsewhere
`, want: "outside the manifest directory"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{"m.yaml": head + tc.third}
			for k, v := range tc.files {
				files[k] = v
			}
			dir := t.TempDir()
			writeTree(t, dir, files)
			_, err := Build(filepath.Join(dir, "m.yaml"), Opts{})
			require.Error(t, err)
			var errs schemas.Errors
			require.ErrorAs(t, err, &errs, "a schemas.Errors naming file and line: %v", err)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "m.yaml:8:9: resources[1]", "the third resource")
		})
	}
}

func TestScaffoldValidSourcePasses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"m.yaml":                   "resources:\n  - scaffold:\n      - /tmp/x:\n          source: tpl\n",
		"tpl/_partials/p.conf":     "[[ data.x ]]",
		"tpl/app.conf":             `[[ render("_partials/p.conf", .) ]] [[ lookup("data.x", 1) ]]`,
		"tpl/sub/other.conf":       "[[ range i, v := data.l ]][[ v ]][[ end ]]",
		"tpl/sub/imports.conf":     `[[ import "/_partials/blocks.jet" ]][[ yield b() ]]`,
		"tpl/_partials/blocks.jet": "[[ block b() ]]x[[ end ]]",
	})
	_, err := Build(filepath.Join(dir, "m.yaml"), Opts{})
	require.NoError(t, err)
}

// The recursive template that overflowed the stack of any process
// compiling it is an invalid manifest now, its error still a
// template.ErrLimit (in a name, rendered before the run, and in a
// property, rendered to validate it).
func TestRecursiveTemplateIsAnError(t *testing.T) {
	t.Parallel()
	const jet = "{{ jet('[[ block r() ]][[ yield r() ]][[ end ]]') }}"
	for name, src := range map[string]string{
		"name":     "data:\n  x: 1\nresources:\n  - file:\n      - \"" + jet + "\":\n          content: x\n",
		"property": "data:\n  x: 1\nresources:\n  - file:\n      - /tmp/x:\n          content: \"" + jet + "\"\n",
	} {
		_, err := Source("m.yaml", []byte(src), Opts{})
		require.ErrorIs(t, err, template.ErrLimit, name)
		require.ErrorContains(t, err, "nested more than 1000 deep", name)
		require.ErrorContains(t, err, "m.yaml:5:", name)
	}
}

// A compilation's templates share its deadline.
func TestCompileDeadline(t *testing.T) {
	t.Parallel()
	// 1,000³ iterations unbounded: hours. Bounded: the deadline, plus
	// parsing (seconds under -race on a loaded machine).
	src := "data:\n  l: [" + repeatList(1000) + "]\nresources:\n  - file:\n      - \"/tmp/{{ jet('[[ range Data.l ]][[ range Data.l ]][[ range Data.l ]][[ end ]][[ end ]][[ end ]]') }}\":\n          content: x\n"
	start := time.Now()
	_, err := Source("m.yaml", []byte(src), Opts{Deadline: time.Now().Add(300 * time.Millisecond)})
	require.ErrorIs(t, err, template.ErrLimit)
	require.ErrorContains(t, err, "took longer than")
	require.Less(t, time.Since(start), time.Minute)
}

func repeatList(n int) string {
	b := make([]byte, 0, 2*n)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '1')
	}
	return string(b)
}

// A panic while compiling is an error wrapping ErrInternal, never a crash
// of the process compiling (the coordinator).
func TestCompilePanicIsAnError(t *testing.T) {
	beforeCompile = func(*schemas.Manifest) { panic("boom") }
	t.Cleanup(func() { beforeCompile = func(*schemas.Manifest) {} })
	_, err := Source("m.yaml", []byte("resources: []\n"), Opts{})
	require.ErrorIs(t, err, ErrInternal)
	require.ErrorContains(t, err, "panic: boom")
}
