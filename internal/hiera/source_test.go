package hiera_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/internal/hiera"
)

const doc = `hierarchy:
  order:
    - env:{{ lookup('facts.env') }}
    - role:{{ lookup('facts.role') }}
  merge: deep
data:
  log_level: INFO
  packages: [ca-certificates]
  web: {listen_port: 80, tls: false}
overrides:
  env:prod:
    log_level: WARN
  role:web:
    packages: [nginx]
    web: {listen_port: 443, tls: true}
`

// A hiera document resolves as CCM's: every matching override section
// merged deep in order over data.
func TestDocumentResolve(t *testing.T) {
	t.Parallel()
	d, err := hiera.ParseDocument("h.yaml", []byte(doc))
	require.NoError(t, err)
	got, err := d.Resolve(map[string]any{"env": "prod", "role": "web"})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"log_level": "WARN", "packages": []any{"ca-certificates", "nginx"},
		"web": map[string]any{"listen_port": 443, "tls": true}}, got)
	got, err = d.Resolve(map[string]any{"env": "dev"})
	require.NoError(t, err)
	require.Equal(t, "INFO", got["log_level"])

	// Plain data is not a hiera document: the error names the line and
	// where plain data goes.
	_, err = hiera.ParseDocument("plain.yaml", []byte("data: {a: 1}\nport: 80\n"))
	require.ErrorIs(t, err, hiera.ErrDocument)
	require.ErrorContains(t, err, "plain.yaml: yaml: unmarshal errors:\n  line 2: field port not found")
	require.ErrorContains(t, err, "plain data goes in --data-file")
	_, err = hiera.ParseDocument("empty.yaml", []byte("hierarchy: {merge: deep}\n"))
	require.ErrorContains(t, err, "empty.yaml has neither data nor overrides")
}

// Sources: a file, https:// (basic authentication from the URL, TLS
// checked), kv://BUCKET/KEY in a real NATS KV bucket; http://, unknown
// schemes and sources over the limit are refused, naming the source but
// never its password.
func TestFetchSource(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	file := filepath.Join(dir, "h.yaml")
	require.NoError(t, os.WriteFile(file, []byte(doc), 0o644))
	got, err := hiera.FetchSource(ctx, file, hiera.SourceOpts{})
	require.NoError(t, err)
	require.Equal(t, doc, string(got))
	got, err = hiera.FetchSource(ctx, "file://"+file, hiera.SourceOpts{})
	require.NoError(t, err)
	require.Equal(t, doc, string(got))
	_, err = hiera.FetchSource(ctx, file, hiera.SourceOpts{MaxBytes: 10})
	require.ErrorContains(t, err, file+": larger than the limit of 10 bytes")
	_, err = hiera.FetchSource(ctx, filepath.Join(dir, "nosuch.yaml"), hiera.SourceOpts{})
	require.ErrorContains(t, err, "nosuch.yaml: no such file")

	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(doc))
	}))
	t.Cleanup(srv.Close)
	base := strings.TrimPrefix(srv.URL, "https://")
	got, err = hiera.FetchSource(ctx, "https://ops:s3cret@"+base+"/h.yaml", hiera.SourceOpts{HTTPClient: srv.Client()})
	require.NoError(t, err)
	require.Equal(t, doc, string(got))
	_, err = hiera.FetchSource(ctx, "https://ops:wrong@"+base+"/h.yaml", hiera.SourceOpts{HTTPClient: srv.Client()})
	require.ErrorContains(t, err, "401 Unauthorized")
	require.NotContains(t, err.Error(), "wrong")
	_, err = hiera.FetchSource(ctx, "https://ops:s3cret@"+base+"/h.yaml", hiera.SourceOpts{})
	require.ErrorContains(t, err, "certificate", "the test server's CA is not the system's")
	require.NotContains(t, err.Error(), "s3cret")
	_, err = hiera.FetchSource(ctx, "http://"+base+"/h.yaml", hiera.SourceOpts{HTTPClient: srv.Client()})
	require.ErrorContains(t, err, "use https://")
	_, err = hiera.FetchSource(ctx, "ftp://x/h.yaml", hiera.SourceOpts{})
	require.ErrorContains(t, err, `unknown scheme "ftp"`)

	_, b := bustest.Start(t, bus.Config{})
	kv, err := b.EnsureDocumentBucket(ctx, "HIERA")
	require.NoError(t, err)
	_, _, err = kv.Create(ctx, "web.yaml", []byte(doc))
	require.NoError(t, err)
	kvGet := func(ctx context.Context, bucket, key string) ([]byte, bool, error) {
		d, err := b.DocumentKV(ctx, bucket)
		if err != nil {
			return nil, false, err
		}
		v, _, found, err := d.Get(ctx, key)
		return v, found, err
	}
	got, err = hiera.FetchSource(ctx, "kv://HIERA/web.yaml", hiera.SourceOpts{KV: kvGet})
	require.NoError(t, err)
	require.Equal(t, doc, string(got))
	_, err = hiera.FetchSource(ctx, "kv://HIERA/nosuch", hiera.SourceOpts{KV: kvGet})
	require.ErrorContains(t, err, `no key "nosuch" in bucket HIERA`)
	_, err = hiera.FetchSource(ctx, "kv://HIERA/web.yaml", hiera.SourceOpts{})
	require.ErrorContains(t, err, "needs a NATS connection")
	_, err = hiera.FetchSource(ctx, "kv://HIERA", hiera.SourceOpts{KV: kvGet})
	require.ErrorContains(t, err, "want kv://BUCKET/KEY")
}
