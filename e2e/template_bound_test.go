package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A template error in the third resource of a manifest, wherever the
// template is (inline jet(), a Jet or template() file, a goss_rules
// file, a scaffold's templates, a scaffold source outside the manifest's
// directory) or a recursive template, stops `manifold apply` and
// `manifold validate` before the first resource: exit 2, the error naming
// the file and line of the third resource, the first resource's file not
// created. The recursive template overflowed the stack (exit 2 too, but
// from a fatal error, 820 MB later); now it is the bound's error, fast.
func TestTemplateErrorsStopTheRunBeforeTheFirstResource(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		third string
		files map[string]string
		want  string
	}{
		"inline jet syntax": {third: `  - file:
      - %[1]s/third:
          content: "{{ jet('[[ if true ]]never closed') }}"
`, want: "template: jet: inline"},
		"jet file syntax": {third: `  - file:
      - %[1]s/third:
          content: "{{ jet('t/app.jet') }}"
`, files: map[string]string{"t/app.jet": "ok\n[[ range ]]\n"}, want: "t/app.jet"},
		"goss_rules file syntax": {third: `  - exec:
      - /bin/true:
          health_checks:
            - goss_rules:
                file:
                  /etc/motd: {contents: ["{{ template('t/motd.templ') }}"]}
`, files: map[string]string{"t/motd.templ": "{{ 1 + }}"}, want: "t/motd.templ"},
		"scaffold jet syntax": {third: `  - scaffold:
      - %[1]s/third:
          source: tpl
`, files: map[string]string{"tpl/a.conf": "ok", "tpl/b.conf": "[[ if ]]"}, want: "b.conf"},
		"scaffold go syntax": {third: `  - scaffold:
      - %[1]s/third:
          source: tpl
          engine: go
`, files: map[string]string{"tpl/a.conf": "{{ .data.x }"}, want: "a.conf"},
		"scaffold source outside": {third: `  - scaffold:
      - %[1]s/third:
          source: ../elsewhere
`, want: "outside the manifest directory"},
		"recursive jet": {third: `  - file:
      - %[1]s/third:
          content: "{{ jet('[[ block r() ]][[ yield r() ]][[ end ]]') }}"
`, want: "evaluation limit exceeded: Jet blocks, includes and exec calls nested more than 1000 deep"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir, out := filepath.Join(root, "m"), filepath.Join(root, "out")
			for _, d := range []string{dir, out, filepath.Join(root, "elsewhere")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			src := fmt.Sprintf(`resources:
  - file:
      - %[1]s/first:
          content: "one"
  - file:
      - %[1]s/second:
          content: "two"
`+tc.third, out)
			for p, content := range tc.files {
				if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, p, content)
			}
			m := writeFile(t, dir, "m.yaml", src)
			for _, cmd := range []string{"validate", "apply"} {
				start := time.Now()
				r := runWith(t, runOpts{dir: dir}, cmd, m)
				wantCode(t, r, 2)
				if !strings.Contains(r.stderr, m+":9:9: resources[2]") {
					t.Errorf("%s: want the error to name %s:9:9 (the third resource):\n%s", cmd, m, r)
				}
				if !strings.Contains(r.stderr, tc.want) {
					t.Errorf("%s: want %q:\n%s", cmd, tc.want, r)
				}
				if d := time.Since(start); d > 20*time.Second {
					t.Errorf("%s: took %s", cmd, d)
				}
			}
			wantAbsent(t, filepath.Join(out, "first"))
			wantAbsent(t, filepath.Join(out, "second"))
		})
	}
}
