package template_test

import (
	"fmt"

	"github.com/manifold-run/manifold/resources/template"
)

func ExampleRender() {
	scope := template.Scope{
		Data:  map[string]any{"port": 8080},
		Facts: map[string]any{"host": map[string]any{"info": map[string]any{"platformFamily": "debian"}}},
	}
	native, _ := template.Render("{{ lookup('data.port') }}", scope)
	text, _ := template.Render("port=${ lookup('data.port') + 1 } on {{ lookup('facts.host.info.platformFamily') }}", scope)
	_, err := template.Render("{{ lookup('data.user') }}", scope)
	fmt.Printf("%T %v\n%s\n%v\n", native, native, text, err)
	// Output:
	// int 8080
	// port=8081 on debian
	// lookup "data.user": key not found
}
