package schemas_test

import (
	"fmt"

	"github.com/manifold-run/manifold/schemas"
)

func ExampleParse() {
	src := []byte(`
resources:
  - file:
      - defaults: {owner: app}
      - /etc/app.conf: {content: "port={{ lookup('data.port') }}"}
  - {type: exec, name: reload, refreshonly: true, subscribe: [file#/etc/app.conf]}
`)
	m, err := schemas.Parse("site.yaml", src)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range m.Resources {
		fmt.Println(r.Pos, r.Ref(), r.Properties)
	}
	// Output:
	// site.yaml:5:9 file#/etc/app.conf map[content:port={{ lookup('data.port') }} owner:app]
	// site.yaml:6:5 exec#reload map[refreshonly:true returns:[0]]
}

func ExampleErrors() {
	src := []byte(`
resources:
  - file:
      - /etc/app.conf: {mode: 644, ownr: app}
`)
	_, err := schemas.Parse("site.yaml", src)
	fmt.Println(err)
	// Output:
	// site.yaml:4:31: resources[0].file[0]./etc/app.conf.mode: conflicting values string and 644 (mismatched types string and int)
	// site.yaml:4:36: resources[0].file[0]./etc/app.conf.ownr: field not allowed (did you mean "owner"?)
}
