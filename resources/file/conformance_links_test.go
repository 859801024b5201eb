package file_test

import (
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
	"github.com/manifold-run/manifold/resources/file"
)

func TestConformanceLinks(t *testing.T) {
	t.Parallel()
	conformance.RunLinks(t, conformance.WriteCase{
		New: func(t *testing.T, path string) (resources.Resource, *resources.Env) {
			res, err := file.New(resources.Spec{Type: file.Type, Name: path, Properties: map[string]any{
				"content": `{"port": 1}` + "\n", "mode": "0644", "show_diff": true}})
			if err != nil {
				t.Fatal(err)
			}
			return res, nil
		},
		LinkAtPath: conformance.LinkReplaced,
	})
}
