package template

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain text", "hello", ""},
		{"valid lookup", "{{ lookup('facts.host.info.os') }}", ""},
		{"valid mixed", "a ${ upper(lookup('data.x')) } b {{ 1 + 2 }}", ""},
		{"escaped opener", `\{{ not a template`, ""},
		{"unclosed", "x {{ lookup('data.a') ", `"{{" at offset 2 has no closing "}}"`},
		{"unknown function", "{{ nosuch('a') }}", `expression "nosuch('a')"`},
		{"syntax error", "{{ 1 + }}", `expression "1 +"`},
		{"empty expression", "{{ }}", "empty expression"},
		{"inline jet syntax", "{{ jet('[[ if ]]') }}", "template: jet: inline"},
		{"inline jet delimiters", "{{ jet('<< Data.x', '<<', '>>') }}", "template: jet: inline"},
		{"inline jet valid", "{{ jet('[[ Data.x ]]') }} {{ jet('<< Data.x >>', '<<', '>>') }}", ""},
		{"inline template syntax", "{{ template('{{ 1 + }}') }}", `expression "1 +"`},
		{"jet file left to CheckFile", "{{ jet('x.jet') }}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Check(tt.in)
			if tt.want == "" {
				require.NoError(t, err, tt.in)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCheckValueNamesThePath(t *testing.T) {
	t.Parallel()
	v := map[string]any{
		"ok":  "{{ lookup('data.a') }}",
		"env": []any{"A=1", "B={{ nosuch() }}"},
		"z":   "{{ 1 +",
	}
	err := CheckValue(v)
	var pe *PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "env.1", pe.Path, "keys are visited in sorted order")
	require.NoError(t, CheckValue(map[string]any{"a": 1, "b": []string{"x"}, "c": map[string]string{"d": "${ 2 }"}}))
}

func TestCheckFile(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"ok.templ":  "port={{ lookup('data.port') }} {{ jet('inc.jet') }}",
		"inc.jet":   "[[ Data.port ]]",
		"bad.jet":   "[[ range ]]",
		"bad.templ": "{{ 1 + }}",
		"via.templ": "{{ template('bad.jet') }}",
	}
	read := func(name string) ([]byte, error) {
		s, ok := files[name]
		if !ok {
			return nil, os.ErrNotExist
		}
		return []byte(s), nil
	}
	require.NoError(t, CheckFile("ok.templ", read))
	require.NoError(t, CheckFile("missing.jet", read), "a missing file is the run's to report")
	require.ErrorContains(t, CheckFile("bad.jet", read), "template: jet: bad.jet")
	require.ErrorContains(t, CheckFile("bad.templ", read), "bad.templ")
	require.ErrorContains(t, CheckFile("via.templ", read), "bad.jet", "files named by files are checked")
}

func TestCheckKeys(t *testing.T) {
	t.Parallel()
	err := CheckKeys(map[string]any{"file": map[string]any{"{{ 1 + }}": map[string]any{"exists": true}}})
	var pe *PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "file.{{ 1 + }}", pe.Path)
	require.NoError(t, CheckKeys(map[string]any{"file": map[string]any{"/etc/{{ lookup('data.x') }}": 1}}))
}
