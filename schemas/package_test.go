package schemas

import (
	"strings"
	"testing"
)

func TestPackageSchema(t *testing.T) {
	t.Parallel()
	m, err := Parse("ok.yaml", []byte(`resources:
  - package:
      - nginx: {ensure: latest}
      - jq: {ensure: "1.6-2.1+deb12u3", provider: apt}
      - "{{ lookup('data.pkg') }}": {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Resources) != 3 || m.Resources[0].Ensure != "latest" || m.Resources[2].Ensure != "present" {
		t.Fatalf("resources %+v", m.Resources)
	}

	_, err = Parse("bad.yaml", []byte(`resources:
  - package:
      - "nginx; rm -rf /": {}
      - jq: {ensure: "1.0 && reboot"}
      - sl: {provider: yum}
`))
	if err == nil {
		t.Fatal("bad packages accepted")
	}
	for _, want := range []string{"bad.yaml:3:9:", "bad.yaml:4:22:", "bad.yaml:5:24:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
}
