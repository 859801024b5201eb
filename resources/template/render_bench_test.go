package template

import (
	"fmt"
	"sync"
	"testing"
)

// benchProps returns the properties of e2e/bench's files (its defaults
// applied): n of them, each content a distinct text around one lookup.
func benchProps(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{
			"owner": "root", "group": "root", "mode": "0644",
			"content": fmt.Sprintf("{{ lookup('data.greeting') }} from file %d\n", i),
		}
	}
	return out
}

// renderSpecShape is what resources.RenderSpec does with a resource:
// ensure and provider rendered, then the properties.
func renderSpecShape(b *testing.B, props map[string]any, scope Scope) {
	for _, s := range []string{"present", ""} {
		if _, err := Render(s, scope); err != nil {
			b.Fatal(err)
		}
	}
	v, err := RenderValue(props, scope)
	if err != nil {
		b.Fatal(err)
	}
	if len(v.(map[string]any)) != 4 {
		b.Fatalf("rendered %v", v)
	}
}

// BenchmarkRenderSpec renders the properties of e2e/bench's files: over
// one reusable scope (the compilation of validate), and over a scope made
// for each resource (a worker's task).
func BenchmarkRenderSpec(b *testing.B) {
	props := benchProps(20_000)
	data := map[string]any{"greeting": "hello"}
	b.Run("reusable", func(b *testing.B) {
		scope := Scope{Data: data}.Reusable()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			renderSpecShape(b, props[i%len(props)], scope)
		}
	})
	b.Run("worker", func(b *testing.B) {
		facts := map[string]any{"host": map[string]any{"info": map[string]any{"hostname": "h"}}}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			renderSpecShape(b, props[i%len(props)], Scope{Data: data, Facts: facts})
		}
	})
	b.Run("plain", func(b *testing.B) {
		plain := map[string]any{"owner": "root", "group": "root", "mode": "0644", "content": "hello from file 1\n"}
		scope := Scope{Data: data}.Reusable()
		b.ReportAllocs()
		for b.Loop() {
			renderSpecShape(b, plain, scope)
		}
	})
}

// BenchmarkCheckThenRender is validate's path for one content text: Check
// (the syntax pass), then Render over the compilation's scope.
func BenchmarkCheckThenRender(b *testing.B) {
	props := benchProps(20_000)
	scope := Scope{Data: map[string]any{"greeting": "hello"}}.Reusable()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := props[i%len(props)]["content"].(string)
		if err := Check(s); err != nil {
			b.Fatal(err)
		}
		if _, err := Render(s, scope); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderPlainString renders a text without markers.
func BenchmarkRenderPlainString(b *testing.B) {
	scope := Scope{}.Reusable()
	b.ReportAllocs()
	for b.Loop() {
		if v, err := Render("hello from file 1\n", scope); err != nil || v != "hello from file 1\n" {
			b.Fatal(v, err)
		}
	}
}

// BenchmarkParse is the parse of one content text of e2e/bench, beside
// the copying parser it replaced and a hit in a sync.Map keyed by the text: what a cache of parsed templates
// would cost instead (b.N texts, 20,000 distinct).
func BenchmarkParse(b *testing.B) {
	props := benchProps(20_000)
	texts := make([]string, len(props))
	for i, p := range props {
		texts[i] = p["content"].(string)
	}
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var buf [maxStackParts]part
			if parts, err := parseInto(buf[:0], texts[i%len(texts)]); err != nil || len(parts) != 2 {
				b.Fatal(len(parts), err)
			}
		}
	})
	b.Run("copying", func(b *testing.B) { // the parser before (render_cow_test.go)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if parts, err := oldParse(texts[i%len(texts)]); err != nil || len(parts) != 2 {
				b.Fatal(len(parts), err)
			}
		}
	})
	b.Run("cache-hit", func(b *testing.B) {
		var cache sync.Map
		for _, s := range texts {
			parts, _ := parse(s)
			cache.Store(s, parts)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if v, ok := cache.Load(texts[i%len(texts)]); !ok || len(v.([]part)) != 2 {
				b.Fatal(v)
			}
		}
	})
}
