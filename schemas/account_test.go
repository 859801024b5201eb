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

func TestUserSchema(t *testing.T) {
	t.Parallel()
	m, err := Parse("ok.yaml", []byte(`resources:
  - user:
      - alice:
          uid: 1001
          gid: staff
          groups: [sudo, adm]
          home: /home/alice
          shell: /bin/bash
          comment: "Alice Liddell,,,"
          managehome: true
      - deploy: {uid: "2001", gid: 2001, groups: [], system: true}
      - bob: {ensure: absent, comment: `+strings.Repeat("c", 255)+`}
      - "{{ lookup('data.user') }}": {shell: "{{ lookup('data.shell') }}"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Resources) != 4 || m.Resources[0].Ensure != "present" || m.Resources[2].Ensure != "absent" {
		t.Fatalf("resources %+v", m.Resources)
	}

	long := strings.Repeat("c", 256)
	_, err = Parse("bad.yaml", []byte(`resources:
  - user:
      - "alice && reboot": {}
      - a1: {uid: abc}
      - a2: {gid: "staff;id"}
      - a3: {groups: [sudo, "-G"]}
      - a4: {home: relative/home}
      - a5: {shell: "/bin/sh:x"}
      - a6: {comment: `+long+`}
      - a7: {password: secret}
`))
	if err == nil {
		t.Fatal("bad users accepted")
	}
	for _, want := range []string{"bad.yaml:3:9:", "bad.yaml:4:19:", "bad.yaml:5:19:", "bad.yaml:6:29:", "bad.yaml:7:20:", "bad.yaml:8:21:", "bad.yaml:9:23:", "bad.yaml:10:14:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
	if strings.Count(err.Error(), "bad.yaml:") != 8 {
		t.Errorf("want 8 errors:\n%v", err)
	}
}
