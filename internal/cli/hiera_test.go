package cli

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// --hiera reads a hiera document as CCM does: its data, hierarchy and
// overrides resolved over the host's facts and merged over the manifest's
// data; --data-file and --data still win. From a file and over https://.
func TestHieraDocument(t *testing.T) {
	dir := t.TempDir()
	const hieraDoc = `hierarchy:
  order: ["role:{{ lookup('facts.role') }}"]
  merge: deep
data:
  port: 80
  motd: hiera
overrides:
  role:web: {port: 443}
`
	writeFiles(t, dir, map[string]string{
		"h.yaml":     hieraDoc,
		"d.yaml":     "motd: datafile\n",
		"plain.yaml": "port: 8080\n",
		"m.yaml": `data: {port: 1, name: app, motd: manifest}
resources:
  - exec:
      - "{{ lookup('data.name') }}-{{ lookup('data.port') }}-{{ lookup('data.motd') }}": {command: /bin/true}
`,
	})
	m := filepath.Join(dir, "m.yaml")
	render := func(args ...string) result {
		t.Helper()
		return run(t, append([]string{"render", m, "--facts-dir", dir}, args...)...)
	}
	r := render("--hiera", filepath.Join(dir, "h.yaml"), "--fact", "role=web")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.Contains(t, r.stdout, `"name": "app-443-hiera"`)
	r = render("--hiera", filepath.Join(dir, "h.yaml"), "--fact", "role=db")
	require.Contains(t, r.stdout, `"name": "app-80-hiera"`)
	r = render("--hiera", filepath.Join(dir, "h.yaml"), "--fact", "role=web", "--data-file", filepath.Join(dir, "d.yaml"), "--data", "port=9")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.Contains(t, r.stdout, `"name": "app-9-datafile"`)

	// Plain data is refused, saying where it goes.
	r = render("--hiera", filepath.Join(dir, "plain.yaml"))
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "manifold render: --hiera: hiera: bad hiera document: "+filepath.Join(dir, "plain.yaml")+": yaml: unmarshal errors:\n  line 1: field port not found")
	require.Contains(t, r.stderr, "plain data goes in --data-file")

	// Over https, with the password in the URL sent as basic
	// authentication and never printed.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(hieraDoc))
	}))
	t.Cleanup(srv.Close)
	hieraHTTPClient = srv.Client()
	t.Cleanup(func() { hieraHTTPClient = nil })
	host := strings.TrimPrefix(srv.URL, "https://")
	r = render("--hiera", "https://ops:s3cret@"+host+"/h.yaml", "--fact", "role=web")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.Contains(t, r.stdout, `"name": "app-443-hiera"`)
	r = render("--hiera", "https://ops:bad@"+host+"/h.yaml", "--fact", "role=web")
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "401 Unauthorized")
	require.NotContains(t, r.stderr, "bad@")

	// kv:// needs a connection; render has none.
	r = render("--hiera", "kv://HIERA/web.yaml")
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "a kv:// source needs a NATS connection")
}
