package schemas

import (
	"strings"
	"testing"
)

func TestGroupSchema(t *testing.T) {
	t.Parallel()
	m, err := Parse("ok.yaml", []byte(`resources:
  - group:
      - webops: {gid: 2001}
      - deploy: {gid: "2002", system: true}
      - _apt: {ensure: absent}
      - "{{ lookup('data.group') }}": {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Resources) != 4 || m.Resources[0].Ensure != "present" || m.Resources[2].Ensure != "absent" {
		t.Fatalf("resources %+v", m.Resources)
	}

	_, err = Parse("bad.yaml", []byte(`resources:
  - group:
      - "web;reboot": {}
      - "1234": {}
      - webops: {gid: abc}
      - devops: {gid: -1}
      - ops: {gid: 4294967295}
      - dev: {members: [alice]}
`))
	if err == nil {
		t.Fatal("bad groups accepted")
	}
	for _, want := range []string{"bad.yaml:3:9:", "bad.yaml:4:9:", "bad.yaml:5:23:", "bad.yaml:6:23:", "bad.yaml:7:20:", "bad.yaml:8:15:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
}
