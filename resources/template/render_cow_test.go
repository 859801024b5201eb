package template

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RenderValue copies on write: a map or list in which nothing renders is
// returned as it is; one that holds a template is a new one, the input
// untouched; map[string]string and []string are made map[string]any and
// []any, nil maps and lists empty ones, as before.
func TestRenderValueCopyOnWrite(t *testing.T) {
	scope := Scope{Data: map[string]any{"greeting": "hello"}}
	same := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }

	plain := map[string]any{"owner": "root", "mode": "0644", "n": 3, "l": []any{"a", map[string]any{"k": "v"}}}
	out, err := RenderValue(plain, scope)
	require.NoError(t, err)
	require.True(t, same(plain, out), "nothing renders: the input itself")

	list := []any{"a", 1, []any{"b"}}
	out, err = RenderValue(list, scope)
	require.NoError(t, err)
	require.True(t, same(list, out))

	inner := map[string]any{"k": "v"}
	tmpl := map[string]any{"content": "{{ lookup('data.greeting') }} x", "inner": inner,
		"l": []any{"a", "{{ 1 + 1 }}"}, "mode": "0644"}
	before := fmt.Sprint(tmpl)
	out, err = RenderValue(tmpl, scope)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"content": "hello x", "inner": map[string]any{"k": "v"},
		"l": []any{"a", 2}, "mode": "0644"}, out)
	require.False(t, same(tmpl, out))
	require.False(t, same(tmpl["l"], out.(map[string]any)["l"]))
	require.True(t, same(inner, out.(map[string]any)["inner"]), "an untemplated branch is shared")
	require.Equal(t, before, fmt.Sprint(tmpl), "the input is not modified")

	out, err = RenderValue(map[string]any{"s": map[string]string{"a": "b"}, "l": []string{"c"},
		"nm": map[string]any(nil), "nl": []any(nil)}, scope)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"s": map[string]any{"a": "b"}, "l": []any{"c"},
		"nm": map[string]any{}, "nl": []any{}}, out)
	require.NotNil(t, out.(map[string]any)["nm"].(map[string]any))
	require.NotNil(t, out.(map[string]any)["nl"].([]any))
}

// RenderValue renders and fails as the copying walk it replaced did
// (oldRenderValue below): same values, same errors, same paths, empty keys
// and nested lists included.
func TestRenderValueMatchesCopyingWalk(t *testing.T) {
	scope := Scope{Data: map[string]any{"greeting": "hello", "n": 2}}
	for i, v := range []any{
		"plain", "{{ data.n }}", "{{ nope( }}", nil, 3,
		map[string]any{"a": "{{ lookup('data.nope') }}"},
		map[string]any{"a": map[string]any{"": []any{"x", map[string]any{"b": "{{ lookup('data.nope') }}"}}}},
		map[string]any{"": map[string]any{"": "{{ lookup('data.nope') }}"}},
		map[string]any{"e": []string{"ok", "{{ 1 + }}"}},
		map[string]any{"e": map[string]string{"k": "{{ 1 +"}},
		[]any{[]any{[]any{"{{ lookup('data.x') }}"}}},
		map[string]any{"a": "{{ data.n }} and {{ lookup('data.greeting') }}", "b": []any{"\\{{ x }}", 1.5}},
		map[string]any{"t": "{{ template('{{ lookup(\"data.missing\") }}') }}"},
	} {
		want, wantErr := oldRenderValue(v, scope.bounded(), "")
		got, err := RenderValue(v, scope)
		if wantErr != nil {
			require.Error(t, err, "%d", i)
			require.Equal(t, wantErr.Error(), err.Error(), "%d", i)
			var wpe, gpe *PathError
			require.Equal(t, errors.As(wantErr, &wpe), errors.As(err, &gpe), "%d", i)
			if wpe != nil {
				require.Equal(t, wpe.Path, gpe.Path, "%d", i)
				require.Equal(t, reflect.TypeOf(wpe.Err), reflect.TypeOf(gpe.Err), "%d", i)
			}
			continue
		}
		require.NoError(t, err, "%d", i)
		require.Equal(t, want, got, "%d", i)
	}
}

// oldRenderValue is RenderValue's walk before copy on write (b409d57):
// every map and list copied, the path joined at each step.
func oldRenderValue(v any, scope Scope, path string) (any, error) {
	switch v := v.(type) {
	case string:
		out, err := Render(v, scope)
		if err != nil {
			return nil, atPath(path, err)
		}
		return out, nil
	case map[string]any:
		return oldRenderMap(v, scope, path)
	case []any:
		return oldRenderList(v, scope, path)
	case map[string]string:
		return oldRenderMap(v, scope, path)
	case []string:
		return oldRenderList(v, scope, path)
	default:
		return v, nil
	}
}

func oldRenderMap[V any](m map[string]V, scope Scope, path string) (any, error) {
	out := make(map[string]any, len(m))
	for k, e := range m {
		r, err := oldRenderValue(e, scope, join(path, k))
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

func oldRenderList[V any](l []V, scope Scope, path string) (any, error) {
	out := make([]any, len(l))
	for i, e := range l {
		r, err := oldRenderValue(e, scope, join(path, fmt.Sprint(i)))
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// parseInto slices its parts out of the text: joined, they are what the
// copying parser it replaced (oldParse below) made, escapes included, and
// it fails where that one failed with the same error.
func TestParseMatchesCopyingParser(t *testing.T) {
	for _, s := range []string{
		"", "plain", "{{ a }}", " {{ a }} ", `\{{ a }}`, `x\{{ a }}y{{ b }}z`, `\${x}${ y }`, `a\{{`, `\{{\{{`,
		`{{ {"a": "}}"} }}`, "${ a } and {{ b }}", "{{ a", "${ a", "{{ }}", "{{ a }}{{ b }}", `\\{{ a }}`,
		"$", "{", "\\", "{{ 'q\\'}}' }}", "{ {{ a }} }", "${ {'k': 1} }",
	} {
		want, wantErr := oldParse(s)
		var buf [maxStackParts]part
		got, err := parseInto(buf[:0], s)
		if wantErr != nil {
			require.Error(t, err, s)
			require.Equal(t, wantErr.Error(), err.Error(), s)
			require.Equal(t, reflect.TypeOf(wantErr), reflect.TypeOf(err), s)
			continue
		}
		require.NoError(t, err, s)
		require.Equal(t, joinLiterals(want), joinLiterals(got), s)
	}
}

// joinLiterals merges adjacent literal parts (parseInto splits a literal
// at an escape).
func joinLiterals(parts []part) []part {
	var out []part
	for _, p := range parts {
		if n := len(out); n > 0 && !p.expr && !out[n-1].expr {
			out[n-1].text += p.text
			continue
		}
		out = append(out, p)
	}
	return out
}

// oldParse is parse as of b409d57: literal text copied byte
// by byte into a builder.
func oldParse(s string) ([]part, error) {
	var (
		parts []part
		lit   strings.Builder
	)
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, part{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, `\{{`), strings.HasPrefix(rest, `\${`):
			lit.WriteString(rest[1:3])
			i += 3
		case strings.HasPrefix(rest, "{{"), strings.HasPrefix(rest, "${"):
			opener := rest[:2]
			double := opener == "{{"
			end := findClose(s, i+2, double)
			if end < 0 {
				return nil, &SyntaxError{Template: s, Offset: i, Opener: opener}
			}
			inner := strings.TrimSpace(s[i+2 : end])
			if inner == "" {
				return nil, &ExprError{Expr: inner, Err: errors.New("empty expression")}
			}
			flush()
			parts = append(parts, part{text: inner, expr: true})
			i = end + 1
			if double {
				i++
			}
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	flush()
	return parts, nil
}

// The allocations of e2e/bench's rendering, bounded: a resource's
// properties without templates render in none, its content text over the
// compilation's reusable scope in 2 (the text and its interface value),
// Check of an expression it has seen in none, parse in none.
func TestRenderAllocations(t *testing.T) {
	scope := Scope{Data: map[string]any{"greeting": "hello"}}.Reusable()
	plain := map[string]any{"owner": "root", "group": "root", "mode": "0644", "content": "hello\n"}
	content := "{{ lookup('data.greeting') }} from file 7\n"
	require.NoError(t, Check(content))
	cases := []struct {
		name string
		max  float64
		fn   func()
	}{
		{"RenderValue without templates", 0, func() { _, _ = RenderValue(plain, scope) }},
		{"Render of a content text", 2, func() { _, _ = Render(content, scope) }},
		{"Check", 0, func() { _ = Check(content) }},
		{"parseInto", 0, func() { var buf [maxStackParts]part; _, _ = parseInto(buf[:0], content) }},
	}
	for _, c := range cases {
		got := testing.AllocsPerRun(100, c.fn)
		require.LessOrEqual(t, got, c.max, c.name)
	}
}

// The expression environment offers every function functions() lists,
// the same Go type, and the six variables.
func TestEnvHasTheFunctions(t *testing.T) {
	env := Scope{}.env()
	fns := Scope{}.functions()
	require.Len(t, env, len(fns)+6)
	for name, fn := range fns {
		require.Contains(t, env, name)
		require.Equal(t, reflect.TypeOf(fn), reflect.TypeOf(env[name]), name)
	}
	for _, v := range []string{"Data", "data", "Facts", "facts", "Environ", "environ"} {
		require.Contains(t, env, v)
	}
}

// HasTemplate's one scan answers what the two Contains it replaced did,
// for every text of up to 4 bytes over the characters that matter.
func TestHasTemplateMatchesContains(t *testing.T) {
	alphabet := []string{"{", "$", "}", "\\", "a"}
	var texts func(prefix string, n int)
	count := 0
	texts = func(prefix string, n int) {
		want := strings.Contains(prefix, "{{") || strings.Contains(prefix, "${")
		require.Equal(t, want, HasTemplate(prefix), "%q", prefix)
		count++
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			texts(prefix+c, n-1)
		}
	}
	texts("", 4)
	require.Equal(t, 1+5+25+125+625, count)
}

// BenchmarkHasTemplate is the test on a property value without markers
// and on e2e/bench's content text, beside the two Contains it replaced.
func BenchmarkHasTemplate(b *testing.B) {
	for _, s := range []string{"0644", "{{ lookup('data.greeting') }} from file 7\n"} {
		b.Run(fmt.Sprint(len(s)), func(b *testing.B) {
			for b.Loop() {
				if HasTemplate(s) != (len(s) > 4) {
					b.Fatal(s)
				}
			}
		})
		b.Run(fmt.Sprint(len(s), "-contains"), func(b *testing.B) { // the test before
			for b.Loop() {
				if (strings.Contains(s, "{{") || strings.Contains(s, "${")) != (len(s) > 4) {
					b.Fatal(s)
				}
			}
		})
	}
}
