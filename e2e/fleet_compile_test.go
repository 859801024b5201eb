package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// fleetSite is a manifest each host compiles with its own facts: a file
// named after the node fact, its content from a hierarchy keyed on it
// (overrides for the nodes given).
func fleetSite(out string, nodes ...string) string {
	s := "hierarchy:\n  order: [\"node:{{ lookup('facts.node') }}\"]\ndata:\n  mode: \"0640\"\noverrides:\n"
	for _, n := range nodes {
		s += fmt.Sprintf("  node:%s: {content: \"content of %s\"}\n", n, n)
	}
	return s + fmt.Sprintf(`resources:
  - file:
      - "%s/{{ lookup('facts.node') }}.conf":
          content: "{{ lookup('data.content') }}"
          mode: "{{ lookup('data.mode') }}"
`, out)
}

// TestFleetCompilesPerHost, with real processes (a server, a coordinator,
// three workers started with --fact node=n1..n3): `run --each-worker`
// gives each host the file its facts name, with the content its facts
// select from the hierarchy; a host whose facts make a template fail
// fails alone with file:line while the others converge; an error that
// needs no facts refuses the run (exit 2) before any host starts; --where
// without --pool targets the default pool by facts, and one matching no
// host exits 2 naming it.
func TestFleetCompilesPerHost(t *testing.T) {
	t.Parallel()
	c := distStart(t)
	var ps []*process
	for _, n := range []string{"n1", "n2", "n3"} {
		name := "w" + n[1:]
		ps = append(ps, start(t, runOpts{}, "worker", "--server", c.url, "--name", name, "--concurrency", "2",
			"--pool", "fleet", "--pool", "default", "--fact", "node="+n,
			"--cache-dir", filepath.Join(c.dir, "cache-"+name), "--drain-timeout", "5s"))
	}
	t.Cleanup(func() {
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	c.waitWorkers(t, func(names []string) bool {
		return slices.Contains(names, "w1") && slices.Contains(names, "w2") && slices.Contains(names, "w3")
	})

	dir, out := t.TempDir(), t.TempDir()
	site := writeFile(t, dir, "site.yaml", fleetSite(out, "n1", "n2", "n3"))
	r := c.run(t, "run", "--each-worker", "--pool", "fleet", "--output", "json", site)
	wantCode(t, r, 0)
	rep := decodeReport(t, r)
	for _, n := range []string{"n1", "n2", "n3"} {
		wantFile(t, filepath.Join(out, n+".conf"), "content of "+n, 0o640)
		child := rep.child(t, "apply#w"+n[1:])
		if got, want := child.Resources[0].Ref, "file#"+filepath.Join(out, n+".conf"); got != want {
			t.Errorf("w%s: child resource %s, want %s", n[1:], got, want)
		}
	}

	// n3 gets no override: data.content is missing on that host only.
	out2 := t.TempDir()
	partial := writeFile(t, dir, "partial.yaml", fleetSite(out2, "n1", "n2"))
	r = c.run(t, "run", "--each-worker", "--pool", "fleet", "--output", "json", partial)
	wantCode(t, r, 1)
	rep = decodeReport(t, r)
	if st := rep.statuses(); st["apply#w1"] != "changed" || st["apply#w2"] != "changed" || st["apply#w3"] != "failed" {
		t.Fatalf("statuses %v, want w1, w2 changed and w3 failed\n%s", st, r)
	}
	w3 := rep.resource(t, "apply#w3")
	// The child names the manifest by its path in the run's bundle.
	if want := "partial.yaml:10:9: "; !strings.HasPrefix(w3.Error, want) || !strings.Contains(w3.Error, `lookup "data.content": key not found`) {
		t.Errorf("w3's error %q, want it to start with %q and name data.content", w3.Error, want)
	}
	wantFile(t, filepath.Join(out2, "n1.conf"), "content of n1", 0o640)
	wantFile(t, filepath.Join(out2, "n2.conf"), "content of n2", 0o640)
	wantAbsent(t, filepath.Join(out2, "n3.conf"))

	// An error no host's facts can change: refused before anything runs.
	out3 := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", fleetSite(out3, "n1", "n2", "n3")+
		"      - \""+out3+"/index\": {content: x, require: [\"file#"+out3+"/other.txt\"]}\n")
	r = c.run(t, "run", "--each-worker", "--pool", "fleet", "--output", "json", bad)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "bad.yaml:14:9") || !strings.Contains(r.stderr, "other.txt: unknown resource") {
		t.Errorf("want the unknown reference at bad.yaml:14:9:\n%s", r)
	}
	wantEmptyDir(t, out3)

	// --where without --pool: the default pool's hosts whose facts match.
	out4 := t.TempDir()
	where := writeFile(t, dir, "where.yaml", fleetSite(out4, "n1", "n2", "n3"))
	r = c.run(t, "run", "--where", "facts.node == 'n2'", "--output", "json", where)
	wantCode(t, r, 0)
	rep = decodeReport(t, r)
	if refs := slices.Collect(func(yield func(string) bool) {
		for _, res := range rep.Resources {
			if !yield(res.Ref) {
				return
			}
		}
	}); !slices.Equal(refs, []string{"apply#w2"}) {
		t.Errorf("--where ran on %v, want [apply#w2]", refs)
	}
	wantFile(t, filepath.Join(out4, "n2.conf"), "content of n2", 0o640)
	wantAbsent(t, filepath.Join(out4, "n1.conf"))

	r = c.run(t, "run", "--where", "facts.node == 'n9'", "--output", "json", where)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, `where "facts.node == 'n9'" matches no live worker of pool "default" (of 3)`) {
		t.Errorf("want the where named:\n%s", r)
	}
}
