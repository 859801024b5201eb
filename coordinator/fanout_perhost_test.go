package coordinator_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// perHostManifest gives each host a file named after its node fact, with
// content from a hierarchy keyed on that fact (overrides for nodes).
func perHostManifest(dir string, nodes ...string) string {
	s := `hierarchy:
  order: ["node:{{ lookup('facts.node') }}"]
data:
  mode: "0640"
overrides:
`
	for _, n := range nodes {
		s += fmt.Sprintf("  node:%s: {content: \"content of %s\"}\n", n, n)
	}
	return s + fmt.Sprintf(`resources:
  - file:
      - "%s/{{ lookup('facts.node') }}.conf":
          content: "{{ lookup('data.content') }}"
          mode: "{{ lookup('data.mode') }}"
`, dir)
}

// TestEachWorkerCompilesPerHost: a fan-out compiles the manifest for each
// host with the facts that host published: its hierarchy, the file's
// name and content are that host's. A host whose facts make a template
// fail fails alone, with file:line; the others go on.
func TestEachWorkerCompilesPerHost(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	for _, n := range []string{"n1", "n2", "n3"} {
		startFleetWorker(t, tb, "w"+n[1:], map[string]any{"node": n})
	}

	dir := t.TempDir()
	rep := tb.run(t, perHostManifest(dir, "n1", "n2", "n3"), func(r *bus.RunRequest) { r.Pool, r.EachWorker = "web", true })
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, []string{"apply#w1", "apply#w2", "apply#w3"}, refs(rep))
	for i, n := range []string{"n1", "n2", "n3"} {
		data, err := os.ReadFile(join(dir, n+".conf"))
		require.NoError(t, err)
		require.Equal(t, "content of "+n, string(data))
		child := rep.Resources[i].Child
		require.NotNil(t, child)
		require.Equal(t, "file#"+join(dir, n+".conf"), child.Resources[0].Ref, "named with its host's facts")
		require.Equal(t, "w"+n[1:], child.Resources[0].Worker)
	}

	// n3 has no override: data.content is missing for that host only.
	dir = t.TempDir()
	rep = tb.run(t, perHostManifest(dir, "n1", "n2"), func(r *bus.RunRequest) { r.Pool, r.Where = "web", "facts.node != ''" })
	require.Equal(t, coordinator.RunFailed, rep.Status, "%+v", rep)
	require.Equal(t, []string{"apply#w1", "apply#w2", "apply#w3"}, refs(rep))
	for _, r := range rep.Resources[:2] {
		require.Equal(t, "changed", r.Status, "%+v", r)
	}
	w3 := rep.Resources[2]
	require.Equal(t, "failed", w3.Status)
	require.True(t, strings.HasPrefix(w3.Error, "m.yaml:10:9: "), "file:line of the resource: %s", w3.Error)
	require.Contains(t, w3.Error, `lookup "data.content": key not found`)
	for _, n := range []string{"n1", "n2"} {
		data, err := os.ReadFile(join(dir, n+".conf"))
		require.NoError(t, err)
		require.Equal(t, "content of "+n, string(data))
	}
	require.NoFileExists(t, join(dir, "n3.conf"))
}

// TestEachWorkerChecksCentrally: what does not depend on the hosts' facts
// is checked once before any host starts: runs.submit refuses it, and
// queued on the stream the run fails with no child run started.
func TestEachWorkerChecksCentrally(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	startFleetWorker(t, tb, "w1", map[string]any{"node": "n1"})
	dir := t.TempDir()
	bad := perHostManifest(dir, "n1") + `      - "` + dir + `/index":
          content: x
          require: ["file#` + dir + `/other.txt"]
`
	reply := submitAPI(t, tb, bus.RunRequest{RunID: coordinator.NewRunID(), ManifestName: "m.yaml",
		ManifestYAML: bad, Pool: "web", EachWorker: true})
	require.NotNil(t, reply.Error, "%+v", reply)
	require.Equal(t, bus.APIInvalid, reply.Error.Code)
	require.Contains(t, fmt.Sprint(reply.Error), "m.yaml:12:9: ")
	require.Contains(t, fmt.Sprint(reply.Error), "require file#"+dir+"/other.txt: unknown resource")

	// A reference a host's name may render to is not refused centrally,
	// and resolves on that host.
	dir2 := t.TempDir()
	good := perHostManifest(dir2, "n1") + `      - "` + dir2 + `/index":
          content: x
          require: ["file#` + dir2 + `/n1.conf"]
`
	reply = submitAPI(t, tb, bus.RunRequest{RunID: coordinator.NewRunID(), ManifestName: "m.yaml",
		ManifestYAML: good, Pool: "web", EachWorker: true})
	require.Nil(t, reply.Error, "%+v", reply)
	rep, _ := tb.wait(t, reply.RunID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.FileExists(t, join(dir2, "index"))

	rep = tb.run(t, bad, func(r *bus.RunRequest) { r.Pool, r.EachWorker = "web", true })
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Contains(t, rep.Error, "unknown resource")
	require.Empty(t, rep.Resources, "no host started")
	require.NoFileExists(t, join(dir, "n1.conf"))
}
