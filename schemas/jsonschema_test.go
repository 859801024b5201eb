package schemas

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/jsonschema"
	cueyaml "cuelang.org/go/encoding/yaml"
)

// The exported JSON Schema is read back with CUE's JSON Schema decoder and
// used to check manifests: the valid ones pass, those with misspelled
// keys, bad values or a wrong shape fail.
func TestJSONSchemaChecksManifests(t *testing.T) {
	t.Parallel()
	b, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["$id"] != JSONSchemaID || doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Fatalf("header: %v %v", doc["$id"], doc["$schema"])
	}
	ctx := cuecontext.New()
	expr, err := jsonschema.Extract(ctx.CompileBytes(b), &jsonschema.Config{})
	if err != nil {
		t.Fatalf("CUE cannot read the JSON Schema back: %v", err)
	}
	schema := ctx.BuildFile(expr)
	if err := schema.Err(); err != nil {
		t.Fatal(err)
	}
	check := func(name string, src []byte) error {
		f, err := cueyaml.Extract(name, src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return schema.Unify(ctx.BuildFile(f)).Validate(cue.Concrete(true))
	}

	valid := []string{"testdata/valid/reserved.yaml", "testdata/same/block.yaml", "testdata/same/flat.yaml", "testdata/same/ccm.yaml",
		"testdata/same/block.json", "testdata/valid/templated.yaml", "testdata/valid/later_ref_graph.yaml"}
	for _, p := range valid {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(filepath.Base(p), src); err != nil {
			t.Errorf("%s: valid manifest refused: %v", p, err)
		}
	}
	for name, src := range map[string]string{
		"defaults and jet file": "defaults: {file: {mode: '0644'}}\nccm:\n  pre_message: hi\n  resources_jet_file: r.jet\n",
		"null properties":       "resources:\n  - file:\n      - /tmp/x:\n",
		"single resource":       "resources:\n  - package: {name: sl, ensure: '5.9'}\n",
	} {
		if err := check(name, []byte(src)); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}

	for name, src := range map[string]string{
		"unknown top-level key":    "resourcs: []\n",
		"unknown property":         "resources:\n  - file:\n      - /tmp/x: {contnet: x}\n",
		"bad mode":                 "resources:\n  - file:\n      - /tmp/x: {mode: '999'}\n",
		"unknown type":             "resources:\n  - fiel:\n      - /tmp/x: {}\n",
		"two names in one entry":   "resources:\n  - file:\n      - {/tmp/x: {}, /tmp/y: {}}\n",
		"flat without name":        "resources:\n  - {type: exec}\n",
		"single without name":      "resources:\n  - package: {sl: {ensure: present}}\n",
		"single unknown property":  "resources:\n  - package: {name: sl, ensrue: present}\n",
		"single with type":         "resources:\n  - package: {name: sl, type: package}\n",
		"flat unknown property":    "resources:\n  - {type: exec, name: /bin/true, comand: x}\n",
		"unknown ccm key":          "ccm:\n  fail_on_eror: true\n",
		"bad ordering":             "ordering: random\n",
		"defaults of unknown type": "defaults: {fiel: {}}\n",
		"bad default property":     "defaults: {exec: {timout: 1s}}\n",
	} {
		if err := check(name, []byte(src)); err == nil {
			t.Errorf("%s: accepted:\n%s", name, src)
		}
	}
	if !strings.Contains(string(b), "#/$defs/block.file") {
		t.Error("no block shape for file")
	}
}
