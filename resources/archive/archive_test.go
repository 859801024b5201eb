package archive

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

// entry is one archive member a test builds.
type entry struct {
	name, body, link string
	typ              entryType
	mode             int64
}

func file(name, body string) entry { return entry{name: name, body: body, typ: typeFile, mode: 0o644} }
func dir(name string) entry        { return entry{name: name, typ: typeDir, mode: 0o755} }
func symlink(name, to string) entry {
	return entry{name: name, link: to, typ: typeSymlink, mode: 0o777}
}

func makeTar(t *testing.T, gz bool, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	var tw *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		tw = tar.NewWriter(zw)
	} else {
		tw = tar.NewWriter(&buf)
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Linkname: e.link, Format: tar.FormatPAX}
		switch e.typ {
		case typeDir:
			h.Typeflag = tar.TypeDir
		case typeSymlink:
			h.Typeflag = tar.TypeSymlink
		case typeHardlink:
			h.Typeflag = tar.TypeLink
		default:
			h.Typeflag = tar.TypeReg
		}
		if e.typ != typeFile {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == typeFile {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func makeZip(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		switch e.typ {
		case typeDir:
			h.SetMode(fs.ModeDir | 0o755)
			if !strings.HasSuffix(h.Name, "/") {
				h.Name += "/"
			}
		case typeSymlink:
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		default:
			h.SetMode(fs.FileMode(e.mode))
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// server serves files by path on loopback and counts requests. When auth is
// set, requests need that basic auth and an X-Token header "t0k".
type server struct {
	*httptest.Server
	files map[string][]byte
	hits  atomic.Int64
}

func newServer(t *testing.T, auth bool, files map[string][]byte) *server {
	t.Helper()
	s := &server{files: files}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if auth {
			u, p, ok := r.BasicAuth()
			if !ok || u != "deploy" || p != "s3cret" || r.Header.Get("X-Token") != "t0k" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
		}
		b, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(s.Close)
	return s
}

func build(t *testing.T, name string, props map[string]any) *Archive {
	t.Helper()
	r, err := New(resources.Spec{Type: Type, Name: name, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r.(*Archive)
}

// tree describes everything under dir: path, kind, mode, content or link.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			lines = append(lines, "missing")
			return nil
		}
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st := fi.Sys().(*syscall.Stat_t)
		line := fmt.Sprintf("%s %s %d:%d", rel, fi.Mode(), st.Uid, st.Gid)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			line += " -> " + l
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %q", b)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func TestConformance(t *testing.T) {
	t.Parallel()
	entries := []entry{dir("app"), dir("app/bin"), file("app/bin/run", "#!/bin/sh\n"), symlink("app/current", "bin"), file("README", "hi\n")}
	for _, tc := range []struct {
		ext  string
		data func(t *testing.T) []byte
	}{
		{".tar.gz", func(t *testing.T) []byte { return makeTar(t, true, entries...) }},
		{".tgz", func(t *testing.T) []byte { return makeTar(t, true, entries...) }},
		{".tar", func(t *testing.T) []byte { return makeTar(t, false, entries...) }},
		{".zip", func(t *testing.T) []byte { return makeZip(t, entries...) }},
	} {
		for _, cleanup := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s cleanup %v", tc.ext, cleanup), func(t *testing.T) {
				t.Parallel()
				data := tc.data(t)
				srv := newServer(t, false, map[string][]byte{"/app" + tc.ext: data})
				base := t.TempDir()
				name, dest := filepath.Join(base, "app"+tc.ext), filepath.Join(base, "opt")
				props := map[string]any{
					"url": srv.URL + "/app" + tc.ext, "checksum": sum(data),
					"extract_parent": dest, "creates": filepath.Join(dest, "app/bin/run"), "cleanup": cleanup,
				}
				conformance.Run(t, conformance.Case{
					New: func(t *testing.T) (resources.Resource, *resources.Env) {
						return build(t, name, props), &resources.Env{}
					},
					Snapshot: func(t *testing.T) string { return tree(t, base) },
				})
				got := tree(t, dest)
				for _, want := range []string{`app/bin/run -rw-r--r-- 0:0 "#!/bin/sh\n"`, "app/current Lrwxrwxrwx 0:0 -> bin", `README -rw-r--r-- 0:0 "hi\n"`} {
					if os.Getuid() == 0 && !strings.Contains(got, want) {
						t.Fatalf("tree lacks %q:\n%s", want, got)
					}
				}
				if _, err := os.Lstat(name); cleanup != errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("archive file after cleanup %v: %v", cleanup, err)
				}
				if n := srv.hits.Load(); n != 1 {
					t.Fatalf("%d downloads, want 1 (noop and converged runs download nothing)", n)
				}
				noLeftovers(t, base)
			})
		}
	}
}

// noLeftovers fails when temporary files or directories are left in dir.
func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".manifold-") {
			t.Fatalf("left behind: %s", e.Name())
		}
	}
}

func TestChecksumMismatch(t *testing.T) {
	t.Parallel()
	data := makeTar(t, true, file("a", "a"))
	srv := newServer(t, false, map[string][]byte{"/a.tgz": data})
	base := t.TempDir()
	name, dest := filepath.Join(base, "a.tgz"), filepath.Join(base, "out")
	wrong := strings.Repeat("0", 64)
	out := resources.Execute(t.Context(), build(t, name, map[string]any{"url": srv.URL + "/a.tgz", "checksum": wrong, "extract_parent": dest}), &resources.Env{})
	if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrChecksum) || !strings.Contains(out.Message, "got sha256 "+sum(data)+", want "+wrong) {
		t.Fatalf("outcome %+v", out)
	}
	if got := tree(t, base); got != ". drwx------ 0:0" && strings.Count(got, "\n") != 0 {
		t.Fatalf("left after a mismatch:\n%s", got)
	}
	noLeftovers(t, base)
}

func TestAuthAndHeaders(t *testing.T) {
	t.Parallel()
	data := makeZip(t, file("x", "x"))
	srv := newServer(t, true, map[string][]byte{"/x.zip": data})
	base := t.TempDir()
	name := filepath.Join(base, "x.zip")
	props := map[string]any{"url": srv.URL + "/x.zip", "username": "deploy", "password": "wrong-pass", "headers": map[string]any{"X-Token": "t0k"}}
	out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{})
	if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrHTTPStatus) || !strings.Contains(out.Message, "401") || strings.Contains(out.Err.Error(), "wrong-pass") {
		t.Fatalf("outcome %+v", out)
	}
	noLeftovers(t, base)
	props["password"] = "s3cret"
	if out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	if b, _ := os.ReadFile(name); !bytes.Equal(b, data) {
		t.Fatal("archive not saved")
	}
}

func TestEscapingEntries(t *testing.T) {
	t.Parallel()
	cases := map[string][]entry{
		"dot-dot":                     {file("ok", "1"), file("../evil", "x")},
		"nested dot-dot":              {file("a/../../evil", "x")},
		"absolute":                    {file("/tmp/evil", "x")},
		"absolute symlink":            {symlink("l", "/etc")},
		"symlink out":                 {dir("a"), symlink("a/l", "../../etc")},
		"symlink chain out":           {symlink("d", "."), symlink("l", "d/../x")},
		"write through symlink out":   {symlink("l", "../"), file("l/evil", "x")},
		"hard link out":               {{name: "h", link: "../outside", typ: typeHardlink}},
		"chain through a linked path": {dir("s"), symlink("s/up", ".."), symlink("s/l", "up/../x")},
	}
	for name, entries := range cases {
		for _, ext := range []string{".tar", ".zip"} {
			if ext == ".zip" && slices.ContainsFunc(entries, func(e entry) bool { return e.typ == typeHardlink }) {
				continue
			}
			t.Run(name+ext, func(t *testing.T) {
				t.Parallel()
				var data []byte
				if ext == ".zip" {
					data = makeZip(t, entries...)
				} else {
					data = makeTar(t, false, entries...)
				}
				srv := newServer(t, false, map[string][]byte{"/a" + ext: data})
				base := t.TempDir()
				dest := filepath.Join(base, "parent", "out")
				if err := os.MkdirAll(dest, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dest, "keep"), []byte("mine"), 0o644); err != nil {
					t.Fatal(err)
				}
				before := tree(t, filepath.Join(base, "parent"))
				a := build(t, filepath.Join(base, "a"+ext), map[string]any{"url": srv.URL + "/a" + ext, "extract_parent": dest})
				out := resources.Execute(t.Context(), a, &resources.Env{})
				if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrEscape) {
					t.Fatalf("outcome %+v", out)
				}
				if after := tree(t, filepath.Join(base, "parent")); after != before {
					t.Fatalf("extraction left changes:\n%s\nwas\n%s", after, before)
				}
				if _, err := os.Lstat(filepath.Join(base, "evil")); err == nil {
					t.Fatal("an entry escaped")
				}
				noLeftovers(t, filepath.Join(base, "parent"))
			})
		}
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	data := makeTar(t, false, file("a", strings.Repeat("a", 600)), file("b", strings.Repeat("b", 400)))
	srv := newServer(t, false, map[string][]byte{"/a.tar": data})
	run := func(lim limits) resources.Outcome {
		base := t.TempDir()
		a := build(t, filepath.Join(base, "a.tar"), map[string]any{"url": srv.URL + "/a.tar", "extract_parent": filepath.Join(base, "out")})
		a.lim = lim
		out := resources.Execute(t.Context(), a, &resources.Env{})
		if out.Status == resources.StatusFailed {
			if _, err := os.Lstat(filepath.Join(base, "out")); err == nil {
				t.Fatalf("%+v: half-extracted output left", lim)
			}
			noLeftovers(t, base)
		}
		return out
	}
	size := int64(len(data))
	for _, tc := range []struct {
		lim  limits
		want string
	}{
		{limits{download: size, extract: 1000, entries: 2}, ""},
		{limits{download: size - 1, extract: 1000, entries: 2}, fmt.Sprintf("%d", size-1)},
		{limits{download: size, extract: 999, entries: 2}, "more than 999 bytes extracted"},
		{limits{download: size, extract: 1000, entries: 1}, "more than 1 entries"},
	} {
		out := run(tc.lim)
		if tc.want == "" {
			if out.Status != resources.StatusChanged {
				t.Fatalf("%+v at the limit: %+v", tc.lim, out)
			}
			continue
		}
		if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrTooLarge) || !strings.Contains(out.Message, tc.want) {
			t.Fatalf("%+v: outcome %+v, want %q", tc.lim, out, tc.want)
		}
	}
}

// TestDownloadLimitWithoutLength: a body longer than the limit with no
// Content-Length is cut at the limit and refused.
func TestDownloadLimitWithoutLength(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Transfer-Encoding", "chunked")
		for range 10 {
			w.Write(bytes.Repeat([]byte("z"), 100))
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	base := t.TempDir()
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{1000, true}, {999, false}} {
		a := build(t, filepath.Join(base, "z.zip"), map[string]any{"url": srv.URL + "/z.zip"})
		a.lim.download = tc.limit
		out := resources.Execute(t.Context(), a, &resources.Env{})
		if tc.ok != (out.Status == resources.StatusChanged) || (!tc.ok && !errors.Is(out.Err, ErrTooLarge)) {
			t.Fatalf("limit %d: %+v", tc.limit, out)
		}
		os.Remove(filepath.Join(base, "z.zip"))
	}
	noLeftovers(t, base)
}

func TestExtractMergesIntoExistingDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dest := filepath.Join(base, "opt")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dest, outside} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dest, "keep"), []byte("mine"), 0o644)
	os.WriteFile(filepath.Join(dest, "conf"), []byte("old"), 0o644)
	// A link someone planted where the archive has a directory.
	if err := os.Symlink(outside, filepath.Join(dest, "lib")); err != nil {
		t.Fatal(err)
	}
	data := makeTar(t, true, file("conf", "new"), dir("lib"), file("lib/x.so", "elf"))
	srv := newServer(t, false, map[string][]byte{"/a.tgz": data})
	a := build(t, filepath.Join(base, "a.tgz"), map[string]any{"url": srv.URL + "/a.tgz", "extract_parent": dest, "creates": filepath.Join(dest, "lib/x.so")})
	if out := resources.Execute(t.Context(), a, &resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	for p, want := range map[string]string{"keep": "mine", "conf": "new", "lib/x.so": "elf"} {
		if b, _ := os.ReadFile(filepath.Join(dest, p)); string(b) != want {
			t.Fatalf("%s = %q, want %q", p, b, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dest, "lib")); err != nil || !fi.IsDir() {
		t.Fatalf("lib: %v %v", fi, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written through the planted link: %v", entries)
	}
	if fi, _ := os.Stat(dest); fi.Mode().Perm() != 0o750 {
		t.Fatalf("existing directory mode changed to %s", fi.Mode())
	}
}

func TestOwnerAndGroup(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to chown")
	}
	data := makeTar(t, true, dir("d"), file("d/f", "x"), symlink("d/l", "f"))
	srv := newServer(t, false, map[string][]byte{"/a.tgz": data})
	base := t.TempDir()
	dest := filepath.Join(base, "out")
	a := build(t, filepath.Join(base, "a.tgz"), map[string]any{"url": srv.URL + "/a.tgz", "extract_parent": dest, "owner": "54321", "group": "54322"})
	if out := resources.Execute(t.Context(), a, &resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	got := tree(t, base)
	for _, p := range []string{"a.tgz ", "out ", "out/d ", "out/d/f ", "out/d/l "} {
		if !strings.Contains(got, "\n"+p) || !strings.Contains(strings.SplitN(strings.SplitN(got, "\n"+p, 2)[1], "\n", 2)[0], "54321:54322") {
			t.Fatalf("%s not owned by 54321:54322:\n%s", p, got)
		}
	}
	// Someone changes the archive's owner: the next run sets it back, nothing downloaded.
	if err := os.Chown(filepath.Join(base, "a.tgz"), 0, 0); err != nil {
		t.Fatal(err)
	}
	out := resources.Execute(t.Context(), a, &resources.Env{})
	if out.Status != resources.StatusChanged || out.Message != "set owner and group to 54321:54322" || srv.hits.Load() != 1 {
		t.Fatalf("outcome %+v, %d downloads", out, srv.hits.Load())
	}
}

func TestAbsent(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	name := filepath.Join(base, "a.zip")
	os.WriteFile(name, []byte("x"), 0o644)
	conformance.Run(t, conformance.Case{
		New: func(t *testing.T) (resources.Resource, *resources.Env) {
			r, err := New(resources.Spec{Type: Type, Name: name, Ensure: "absent", Properties: map[string]any{"url": "http://127.0.0.1:1/a.zip"}})
			if err != nil {
				t.Fatal(err)
			}
			return r, nil
		},
		Snapshot: func(t *testing.T) string { return tree(t, base) },
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := map[string]any{"url": "https://example.com/a.tar.gz"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{"url": "https://example.com/a.tar.gz"}
		m[k] = v
		return m
	}
	tests := []struct {
		name, path string
		props      map[string]any
		want       string
	}{
		{"relative name", "a.tar.gz", ok, `name "a.tar.gz": must be a clean absolute path`},
		{"bad extension", "/a.rar", ok, "must end in .tar.gz"},
		{"type mismatch", "/a.zip", ok, "same archive type"},
		{"ftp", "/a.tar.gz", with("url", "ftp://x/a.tar.gz"), "want an http:// or https:// address"},
		{"password redacted", "/a.tar.gz", with("url", "ftp://u:hunter2@x/a.tar.gz"), "xxxxx"},
		{"checksum", "/a.tar.gz", with("checksum", "abc"), `checksum "abc": want 64 hex digits`},
		{"relative parent", "/a.tar.gz", with("extract_parent", "opt"), `extract_parent "opt": must be a clean absolute path`},
		{"root parent", "/a.tar.gz", with("extract_parent", "/"), "refusing to extract into the root"},
		{"cleanup alone", "/a.tar.gz", with("cleanup", true), "cleanup: needs extract_parent and creates"},
		{"username alone", "/a.tar.gz", with("username", "u"), "set both or neither"},
	}
	for _, tt := range tests {
		r, err := New(resources.Spec{Type: Type, Name: tt.path, Properties: tt.props})
		if err == nil {
			err = r.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := New(resources.Spec{Name: "/a.tar", Properties: map[string]any{"url": "http://x/a.tar", "extract": "/x"}}); err == nil || !strings.Contains(err.Error(), `unknown property "extract"`) {
		t.Fatalf("unknown property: %v", err)
	}
	good := build(t, "/a.tgz", map[string]any{"url": "http://x/b.tar.gz", "checksum": "SHA256:" + strings.Repeat("AB", 32)})
	if good.props.Checksum != strings.Repeat("ab", 32) {
		t.Fatalf("checksum %q", good.props.Checksum)
	}
}

// TestRedirectToAnotherHostDropsCredentials: the headers and basic auth of
// the manifest reach the host of the url, not the host a redirect leads to.
func TestRedirectToAnotherHostDropsCredentials(t *testing.T) {
	t.Parallel()
	data := makeZip(t, file("x", "x"))
	var got atomic.Value
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("X-Token") + "|" + r.Header.Get("Authorization"))
		w.Write(data)
	}))
	other.Listener.Close()
	other.Listener = l
	other.Start()
	defer other.Close()
	first := httptest.NewServer(http.RedirectHandler(other.URL+"/x.zip", http.StatusFound))
	defer first.Close()
	base := t.TempDir()
	props := map[string]any{"url": first.URL + "/x.zip", "username": "deploy", "password": "s3cret", "headers": map[string]any{"X-Token": "t0k"}}
	if out := resources.Execute(t.Context(), build(t, filepath.Join(base, "x.zip"), props), &resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	if g := got.Load(); g != "|" {
		t.Fatalf("the other host saw X-Token|Authorization %q", g)
	}
}

// TestNoopAssumedOwner: in noop, an archive owned by a user and group the
// run would create reports what it would do (it failed: unknown user);
// outside noop, and for a name the run does not create, the unknown
// owner is still an error.
func TestNoopAssumedOwner(t *testing.T) {
	t.Parallel()
	data := makeTar(t, true, file("f", "x"))
	srv := newServer(t, false, map[string][]byte{"/a.tgz": data})
	base := t.TempDir()
	a := build(t, filepath.Join(base, "a.tgz"), map[string]any{"url": srv.URL + "/a.tgz", "extract_parent": filepath.Join(base, "out"),
		"owner": "manifold-nosuch-user", "group": "manifold-nosuch-group"})
	as := &resources.Assumed{Users: []string{"manifold-nosuch-user"}, Groups: []string{"manifold-nosuch-group"}}
	out := resources.Execute(t.Context(), a, &resources.Env{Noop: true, Assume: as})
	if out.Status != resources.StatusChanged || !out.Noop || !strings.Contains(out.Message, "download") {
		t.Fatalf("noop, owner assumed: %+v", out)
	}
	if srv.hits.Load() != 0 {
		t.Fatalf("noop downloaded %d times", srv.hits.Load())
	}
	for _, env := range []*resources.Env{
		{Noop: true, Assume: &resources.Assumed{Users: []string{"someone-else"}}},
		{Noop: false, Assume: as},
	} {
		out := resources.Execute(t.Context(), a, env)
		if out.Status != resources.StatusFailed || !strings.Contains(fmt.Sprint(out.Err), "manifold-nosuch-user") {
			t.Fatalf("noop %v: %+v", env.Noop, out)
		}
	}
}
