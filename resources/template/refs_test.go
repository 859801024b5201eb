package template

import (
	"slices"
	"testing"
)

func TestFileRefs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want []string
	}{
		{"plain text", nil},
		{"{{ file('motd.txt') }}", []string{"motd.txt"}},
		{`${ readFile("a/b.txt") } {{ file('a/b.txt') }}`, []string{"a/b.txt"}},
		{"{{ template('app.templ') }} {{ template('x.jet') }}", []string{"app.templ", "x.jet"}},
		{"{{ template('inline {{ 1 }}') }}", nil},
		{"{{ jet('servers.jet', '<<', '>>') }} {{ jet('[[ 1 ]]') }}", []string{"servers.jet"}},
		{"[[ if Facts.x ]][[ file(\"prod.txt\") ]][[ end ]]", []string{"prod.txt"}},
		{"{{ file(lookup('data.f')) }}", nil},
		{"{{ myfile('x') }} {{ profile('y') }}", nil},
		{"{{ file(`raw.txt`) }}", []string{"raw.txt"}},
	}
	for _, tt := range tests {
		if got := FileRefs(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("FileRefs(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestScopeFilesAndOnRead(t *testing.T) {
	t.Parallel()
	var seen []string
	s := Scope{
		Files: func(name string) ([]byte, error) {
			if name == "big.txt" {
				return make([]byte, MaxFileSize+1), nil
			}
			return []byte("from " + name), nil
		},
		OnRead: func(name string, _ []byte) error { seen = append(seen, name); return nil },
	}
	v, err := Render("{{ file('./a/b.txt') }}", s)
	if err != nil || v != "from a/b.txt" {
		t.Fatalf("Render = %v, %v", v, err)
	}
	if _, err := Render("{{ file('../x') }}", s); err == nil {
		t.Fatal("a path leaving the directory was read from Files")
	}
	if _, err := Render("{{ file('big.txt') }}", s); err == nil {
		t.Fatal("a file over MaxFileSize was accepted from Files")
	}
	if !slices.Equal(seen, []string{"a/b.txt"}) {
		t.Fatalf("OnRead saw %q", seen)
	}
}
