package template

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fileScope returns a scope whose Dir holds a small bundle, plus a secret
// file next to (outside) it.
func fileScope(t *testing.T) Scope {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "bundle")
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("motd.txt", "hello\n")
	write("conf/app.templ", "port={{ lookup('data.port') }} os=${ Facts.host.os }")
	write("conf/port.templ", "{{ lookup('data.port') }}")
	write("conf/self.templ", "{{ template('conf/self.templ') }}")
	write("conf/app.jet", "[[ range i, s := Data.servers ]][[ i ]]=[[ s ]]\n[[ end ]]")
	write("conf/bad.jet", "[[ if ]]")
	write("conf/self.jet", "[[ template(\"conf/self.jet\") ]]")
	write("big/exact", strings.Repeat("x", MaxFileSize))
	write("big/over", strings.Repeat("x", MaxFileSize+1))
	require.NoError(t, os.WriteFile(filepath.Join(base, "secret"), []byte("s3cret"), 0o600))
	require.NoError(t, os.Symlink("../secret", filepath.Join(dir, "escape")))
	require.NoError(t, os.Symlink(filepath.Join(base, "secret"), filepath.Join(dir, "escape-abs")))
	require.NoError(t, os.Symlink("motd.txt", filepath.Join(dir, "inside")))
	return Scope{
		Dir:     dir,
		Data:    map[string]any{"port": 8080, "servers": []any{"a", "b"}, "html": "<b>&</b>"},
		Facts:   map[string]any{"host": map[string]any{"os": "linux"}},
		Environ: map[string]string{"HOME": "/root"},
	}
}

func TestFileFunctions(t *testing.T) {
	t.Parallel()
	scope := fileScope(t)
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"file", "{{ file('motd.txt') }}", "hello\n"},
		{"readFile alias", "${ readFile('motd.txt') }", "hello\n"},
		{"file in text", "motd: {{ trim(file('motd.txt')) }}!", "motd: hello!"},
		{"symlink inside the directory", "{{ file('inside') }}", "hello\n"},
		{"clean path inside", "{{ file('conf/../motd.txt') }}", "hello\n"},
		{"file at the size limit", "{{ len(file('big/exact')) }}", MaxFileSize},
		{"template .templ file", "{{ template('conf/app.templ') }}", "port=8080 os=linux"},
		{"template keeps the native type", "{{ template('conf/port.templ') }}", 8080},
		{"template inline text", "{{ template('p={{ lookup(\"data.port\") }}') }}", "p=8080"},
		{"template .jet file", "{{ template('conf/app.jet') }}", "0=a\n1=b\n"},
		{"jet inline", "{{ jet('[[ Data.port ]] on [[ Facts.host.os ]]') }}", "8080 on linux"},
		{"jet lookup and env", `{{ jet('[[ lookup("data.port") ]] [[ lookup("env.HOME") ]] [[ lookup("data.none", "dflt") ]]') }}`, "8080 /root dflt"},
		{"jet lowercase variables", "{{ jet('[[ data.port ]] [[ environ.HOME ]]') }}", "8080 /root"},
		{"jet file", "{{ jet('conf/app.jet') }}", "0=a\n1=b\n"},
		{"jet custom delimiters", "{{ jet('<< Data.port >>', '<<', '>>') }}", "8080"},
		{"jet does not escape HTML", "{{ jet('[[ Data.html ]]') }}", "<b>&</b>"},
		{"jet file function", "{{ jet('[[ file(\"motd.txt\") ]]') }}", "hello\n"},
		{"jet template function", "{{ jet('[[ template(\"conf/app.templ\") ]]') }}", "port=8080 os=linux"},
		{"lookup env prefix", "{{ lookup('env.HOME') }}", "/root"},
		{"lookup environ prefix", "{{ lookup('environ.HOME') }}", "/root"},
		{"lookup env missing with default", "{{ lookup('env.NOPE', 'x') }}", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tt.in, scope)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestFileFunctionErrors(t *testing.T) {
	t.Parallel()
	scope := fileScope(t)
	noDir := scope
	noDir.Dir = ""
	tests := []struct {
		name  string
		scope Scope
		in    string
		is    error
		msg   string
	}{
		{"absolute path", scope, "{{ file('/etc/passwd') }}", ErrOutsideDir, `"/etc/passwd"`},
		{"dot-dot escape", scope, "{{ file('../secret') }}", ErrOutsideDir, `"../secret"`},
		{"dot-dot escape hidden in path", scope, "{{ file('conf/../../secret') }}", ErrOutsideDir, "outside the manifest directory"},
		{"relative symlink leading out", scope, "{{ file('escape') }}", ErrOutsideDir, `"escape"`},
		{"absolute symlink leading out", scope, "{{ readFile('escape-abs') }}", ErrOutsideDir, `"escape-abs"`},
		{"template escape", scope, "{{ template('../secret.templ') }}", ErrOutsideDir, "secret.templ"},
		{"jet file escape", scope, "{{ jet('../x.jet') }}", ErrOutsideDir, "x.jet"},
		{"file in jet escape", scope, "{{ jet('[[ file(\"../secret\") ]]') }}", ErrJet, "outside the manifest directory"},
		{"missing file", scope, "{{ file('nope.txt') }}", os.ErrNotExist, `"nope.txt"`},
		{"directory", scope, "{{ file('conf') }}", nil, `"conf" is a directory`},
		{"no base directory", noDir, "{{ file('motd.txt') }}", ErrNoDir, "motd.txt"},
		{"file over the size limit", scope, "{{ file('big/over') }}", ErrFileTooLarge, "big/over"},
		{"template including itself", scope, "{{ template('conf/self.templ') }}", ErrDepthExceeded, "more than 8 levels"},
		{"jet including itself", scope, "{{ jet('conf/self.jet') }}", ErrDepthExceeded, "nested too deeply"},
		{"jet syntax error inline", scope, "{{ jet('[[ if ]]') }}", ErrJet, "inline"},
		{"jet syntax error in file", scope, "{{ jet('conf/bad.jet') }}", ErrJet, "conf/bad.jet"},
		{"jet unclosed action", scope, "{{ jet('[[ Data.port') }}", ErrJet, "inline"},
		{"jet missing lookup", scope, "{{ jet('[[ lookup(\"data.nope\") ]]') }}", nil, `lookup "data.nope": key not found`},
		{"jet runtime error", scope, "{{ jet('[[ Data.port / 0 ]]') }}", ErrJet, "inline"},
		{"jet unknown function", scope, "{{ jet('[[ nope(1) ]]') }}", ErrJet, "nope"},
		{"jet wrong delimiter count", scope, "{{ jet('x', '<<') }}", ErrJet, "two delimiters"},
		{"jet empty delimiters", scope, "{{ jet('x', '', '') }}", ErrJet, "must not be empty"},
		{"file wrong argument type", scope, "{{ file(1) }}", nil, "file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tt.in, tt.scope)
			require.Error(t, err, "got %v", got)
			if tt.is != nil {
				require.True(t, errors.Is(err, tt.is), "%v is not %v", err, tt.is)
			}
			require.Contains(t, err.Error(), tt.msg)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
}

func TestRenderEntry(t *testing.T) {
	t.Parallel()
	scope := Scope{Facts: map[string]any{
		"host": map[string]any{"info": map[string]any{"platformFamily": "debian", "empty": ""}},
		"n":    3,
	}}
	tests := []struct {
		name string
		in   string
		want string
		ok   bool
	}{
		{"plain entry", "default", "default", true},
		{"empty entry", "", "", false},
		{"fact", "os:{{ lookup('facts.host.info.platformFamily') }}", "os:debian", true},
		{"dollar fact", "os:${ lookup('facts.host.info.platformFamily') }", "os:debian", true},
		{"missing fact skips", "env:{{ lookup('facts.env') }}", "env:", false},
		{"empty fact skips", "e:{{ lookup('facts.host.info.empty') }}", "e:", false},
		{"one of two present applies", "{{ lookup('facts.env') }}-{{ lookup('facts.n') }}", "-3", true},
		{"number fact", "n:{{ lookup('facts.n') }}", "n:3", true},
		{"default for missing", "env:{{ lookup('facts.env', 'dev') }}", "env:dev", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok, err := RenderEntry(tt.in, scope)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.ok, ok)
		})
	}
	_, _, err := RenderEntry("os:{{ lookup('facts.x'", scope)
	var se *SyntaxError
	require.ErrorAs(t, err, &se)
	_, _, err = RenderEntry("os:{{ 1 + }}", scope)
	var ee *ExprError
	require.ErrorAs(t, err, &ee)
}
