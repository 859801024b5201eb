package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/manifold-run/manifold/resources"
	resourcehttp "github.com/manifold-run/manifold/resources/http"
	"github.com/manifold-run/manifold/resources/ids"
	"github.com/manifold-run/manifold/resources/safefs"
)

// Type is the resource type name, as written in manifests.
const Type = "archive"

const (
	// MaxDownloadBytes bounds the archive file downloaded (1 GiB).
	MaxDownloadBytes = 1 << 30
	// MaxExtractBytes bounds the bytes of all files extracted from one
	// archive (4 GiB), so a small archive cannot fill the disk.
	MaxExtractBytes = 4 << 30
	// MaxEntries bounds the entries of one archive (100,000).
	MaxEntries = 100_000
	// connectTimeout bounds connecting, the TLS handshake and waiting for
	// response headers; the body is bounded by the task's timeout.
	connectTimeout = 30 * time.Second
)

// Ensure is the desired state of an archive.
type Ensure string

const (
	// EnsurePresent downloads (and extracts) the archive; the default.
	EnsurePresent Ensure = "present"
	// EnsureAbsent removes the archive file (never what was extracted).
	EnsureAbsent Ensure = "absent"
)

type kind int

const (
	kindTar kind = iota
	kindTarGz
	kindZip
)

// kindOf tells the archive format from a file name.
func kindOf(name string) (kind, bool) {
	switch {
	case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
		return kindTarGz, true
	case strings.HasSuffix(name, ".tar"):
		return kindTar, true
	case strings.HasSuffix(name, ".zip"):
		return kindZip, true
	}
	return 0, false
}

// Properties are the archive type's properties (CCM's names).
type Properties struct {
	// URL is the http or https address to download from.
	URL string `json:"url"`
	// Headers are extra request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Username and Password, when set, authenticate with HTTP basic auth.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Checksum is the sha256 of the archive, in hex.
	Checksum string `json:"checksum,omitempty"`
	// ExtractParent is the directory the archive is extracted into.
	ExtractParent string `json:"extract_parent,omitempty"`
	// Creates is a path whose existence means the archive was extracted:
	// nothing is downloaded or extracted then.
	Creates string `json:"creates,omitempty"`
	// Cleanup removes the archive file after extraction (needs
	// extract_parent and creates).
	Cleanup bool `json:"cleanup,omitempty"`
	// Owner and Group own the archive file and every extracted entry;
	// empty means the worker's user and group.
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
}

// Archive is an archive resource. Build it with New.
type Archive struct {
	path     string
	provider string
	ensure   Ensure
	props    Properties
	lim      limits
}

var (
	_ resources.Resource = (*Archive)(nil)
	_ resources.Factory  = New
)

// New is the archive type's resources.Factory: it decodes spec's
// properties.
func New(spec resources.Spec) (resources.Resource, error) {
	a := &Archive{path: spec.Name, ensure: Ensure(spec.Ensure), provider: spec.Provider,
		lim: limits{download: MaxDownloadBytes, extract: MaxExtractBytes, entries: MaxEntries}}
	if a.ensure == "" {
		a.ensure = EnsurePresent
	}
	if err := resources.DecodeProperties(spec.Properties, &a.props); err != nil {
		return nil, err
	}
	a.props.Checksum = strings.TrimPrefix(strings.ToLower(a.props.Checksum), "sha256:")
	return a, nil
}

// Validate checks the properties without touching the system.
func (a *Archive) Validate() error {
	if !filepath.IsAbs(a.path) || filepath.Clean(a.path) != a.path {
		return fmt.Errorf("name %q: must be a clean absolute path", a.path)
	}
	nameKind, ok := kindOf(a.path)
	if !ok {
		return fmt.Errorf("name %q: must end in .tar.gz, .tgz, .tar or .zip", a.path)
	}
	if a.provider != "" && a.provider != "http" {
		return fmt.Errorf("provider %q: archive has only the http provider", a.provider)
	}
	switch a.ensure {
	case EnsurePresent, EnsureAbsent:
	default:
		return fmt.Errorf("ensure %q: must be present or absent", a.ensure)
	}
	u, err := url.Parse(a.props.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q: want an http:// or https:// address", redact(a.props.URL))
	}
	if urlKind, ok := kindOf(u.Path); !ok || urlKind != nameKind {
		return fmt.Errorf("url %q: its file name must be the same archive type as the name (.tar.gz, .tgz, .tar or .zip)", u.Redacted())
	}
	if c := a.props.Checksum; c != "" {
		if b, err := hex.DecodeString(c); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("checksum %q: want 64 hex digits of sha256", c)
		}
	}
	for _, p := range []struct{ name, path string }{{"extract_parent", a.props.ExtractParent}, {"creates", a.props.Creates}} {
		if p.path != "" && (!filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path) {
			return fmt.Errorf("%s %q: must be a clean absolute path", p.name, p.path)
		}
	}
	if a.props.ExtractParent == "/" {
		return errors.New(`extract_parent "/": refusing to extract into the root directory`)
	}
	if a.props.Cleanup && (a.props.ExtractParent == "" || a.props.Creates == "") {
		return errors.New("cleanup: needs extract_parent and creates")
	}
	if (a.props.Username == "") != (a.props.Password == "") {
		return errors.New("username and password: set both or neither")
	}
	return nil
}

// CheckApply converges the archive: ensure absent removes the archive file;
// present does nothing when creates exists (and no interrupted extraction
// left its temporary tree), otherwise downloads the archive when it is
// missing or its checksum differs, extracts it when it was downloaded,
// creates is missing or an extraction was interrupted, removes it with
// cleanup, and sets the archive file's owner and group.
//
// With extract_parent, the archive file is put in place only once its
// extraction is complete: its presence is the mark of a finished
// extraction. An extraction that fails removes the archive file, so the
// next run downloads and extracts (or refuses) it again.
func (a *Archive) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if a.ensure == EnsureAbsent {
		return a.absent(apply)
	}
	var left []string
	if dest := a.props.ExtractParent; dest != "" {
		parent, name, err := openDest(dest, false)
		if err != nil {
			return resources.Result{}, err
		}
		if parent != nil {
			left, err = leftovers(parent, name)
			parent.Close()
			if err != nil {
				return resources.Result{}, err
			}
		}
	}
	if c := a.props.Creates; c != "" && len(left) == 0 {
		if _, err := os.Lstat(c); err == nil {
			return resources.Result{Message: "creates " + c + " exists"}, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return resources.Result{}, fmt.Errorf("creates: %w", err)
		}
	}
	uid, gid, err := a.ids()
	var assumed []string // owner or group the run would create (noop)
	if err != nil && !apply {
		uid, gid, assumed, err = a.assumedIDs(env.Assumed())
	}
	if err != nil {
		return resources.Result{}, err
	}
	fi, err := os.Lstat(a.path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return resources.Result{}, err
	}
	if exists && !fi.Mode().IsRegular() {
		return resources.Result{}, fmt.Errorf("%s exists and is not a regular file (%s)", a.path, fi.Mode().Type())
	}
	download := !exists
	if exists && a.props.Checksum != "" {
		sum, err := sha256File(a.path)
		if err != nil {
			return resources.Result{}, err
		}
		download = sum != a.props.Checksum
	}
	unpack := a.props.ExtractParent != "" && (download || a.props.Creates != "" || len(left) > 0)
	cleanup := a.props.Cleanup && (unpack || exists)
	var changes []string
	if len(left) > 0 {
		changes = append(changes, fmt.Sprintf("remove %d leftover(s) of an interrupted extraction (%s)", len(left), strings.Join(left, ", ")))
	}
	if download {
		changes = append(changes, "download "+redact(a.props.URL))
	}
	if unpack {
		changes = append(changes, "extract into "+a.props.ExtractParent)
	}
	if cleanup {
		changes = append(changes, "remove the archive (cleanup)")
	}
	chown := !download && !cleanup && exists && idsDiffer(fi, uid, gid)
	if chown {
		changes = append(changes, fmt.Sprintf("set owner and group to %d:%d", uid, gid))
	}
	if len(assumed) > 0 && exists && !download && !cleanup {
		changes = append(changes, "set "+strings.Join(assumed, " and ")+" (created by this run)")
	}
	if len(changes) == 0 {
		return resources.Result{}, nil
	}
	res := resources.Result{Changed: true, Message: strings.Join(changes, ", ")}
	if !apply {
		return res, nil
	}
	return res, a.apply(ctx, fi, download, unpack, cleanup, chown, uid, gid)
}

// apply downloads (into a temporary file beside the name), extracts, then
// renames the download into place or, with cleanup, removes it. A failed
// extraction removes the archive, downloaded or not.
func (a *Archive) apply(ctx context.Context, fi fs.FileInfo, download, unpack, cleanup, chown bool, uid, gid int) error {
	dir, name, err := safefs.OpenParent(a.path)
	if err != nil {
		return err
	}
	defer dir.Close()
	var (
		src     *os.File
		tmpName string
	)
	if download {
		if src, err = a.download(ctx, dir, name, uid, gid); err != nil {
			return err
		}
		tmpName = filepath.Base(src.Name())
		defer func() {
			src.Close()
			if tmpName != "" {
				dir.Remove(tmpName)
			}
		}()
	} else if unpack {
		if src, _, err = dir.Open(name, os.O_RDONLY, fi); err != nil {
			return err
		}
		defer src.Close()
	}
	if unpack {
		k, _ := kindOf(a.path)
		if err := extract(ctx, src, k, a.props.ExtractParent, a.lim, uid, gid); err != nil {
			if !download {
				// What failed goes, so the next run tries again.
				if rerr := dir.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
					err = errors.Join(err, rerr)
				}
			}
			return fmt.Errorf("extract %s: %w", a.path, err)
		}
	}
	switch {
	case download && cleanup:
		// tmpName is removed by the deferred function.
	case download:
		if err := dir.Rename(tmpName, dir, name); err != nil {
			return err
		}
		tmpName = ""
	case cleanup:
		if err := dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if chown {
		if err := os.Lchown(a.path, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

func (a *Archive) absent(apply bool) (resources.Result, error) {
	fi, err := os.Lstat(a.path)
	if errors.Is(err, fs.ErrNotExist) {
		return resources.Result{}, nil
	}
	if err != nil {
		return resources.Result{}, err
	}
	if fi.IsDir() {
		return resources.Result{}, fmt.Errorf("%s is a directory, not an archive", a.path)
	}
	res := resources.Result{Changed: true, Message: "remove " + a.path}
	if !apply {
		return res, nil
	}
	return res, os.Remove(a.path)
}

// download fetches the archive into a temporary file beside it in dir
// (safefs's ".NAME.manifold-N", flocked), bounded by the download limit,
// verifies its checksum and returns it open; the caller renames it into
// place once it is extracted. Any failure removes the temporary file.
func (a *Archive) download(ctx context.Context, dir *safefs.Dir, name string, uid, gid int) (_ *os.File, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.props.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	for k, v := range a.props.Headers {
		req.Header.Set(k, v)
	}
	if a.props.Username != "" {
		req.SetBasicAuth(a.props.Username, a.props.Password)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", redact(a.props.URL), scrub(err, a.props.Password))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: %w %s", redact(a.props.URL), ErrHTTPStatus, resp.Status)
	}
	if resp.ContentLength > a.lim.download {
		return nil, fmt.Errorf("download %s: %w: %d bytes announced, limit %d", redact(a.props.URL), ErrTooLarge, resp.ContentLength, a.lim.download)
	}
	tmp, err := dir.CreateTemp(name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			dir.Remove(filepath.Base(tmp.Name()))
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, a.lim.download+1))
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", redact(a.props.URL), err)
	}
	if n > a.lim.download {
		return nil, fmt.Errorf("download %s: %w: more than %d bytes", redact(a.props.URL), ErrTooLarge, a.lim.download)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); a.props.Checksum != "" && sum != a.props.Checksum {
		return nil, fmt.Errorf("download %s: %w: got sha256 %s, want %s", redact(a.props.URL), ErrChecksum, sum, a.props.Checksum)
	}
	if uid >= 0 || gid >= 0 {
		if err = tmp.Chown(uid, gid); err != nil {
			return nil, err
		}
	}
	if err = tmp.Sync(); err != nil {
		return nil, err
	}
	return tmp, nil
}

// httpClient bounds connecting and waiting for headers; the body is bounded
// by ctx (the task's timeout) and the download limit. A redirect to another
// host sends none of the headers and credentials of the manifest
// (resourcehttp.CheckRedirect).
var httpClient = &http.Client{CheckRedirect: resourcehttp.CheckRedirect, Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: connectTimeout}).DialContext,
	TLSHandshakeTimeout:   connectTimeout,
	ResponseHeaderTimeout: connectTimeout,
	ForceAttemptHTTP2:     true,
}}

// ids resolves owner and group; -1 means unmanaged.
func (a *Archive) ids() (uid, gid int, err error) {
	uid, gid = -1, -1
	if a.props.Owner != "" {
		if uid, err = ids.UID(a.props.Owner); err != nil {
			return 0, 0, err
		}
	}
	if a.props.Group != "" {
		if gid, err = ids.GID(a.props.Group); err != nil {
			return 0, 0, err
		}
	}
	return uid, gid, nil
}

// assumedIDs resolves owner and group in a noop run where the run would
// create them (a user or group resource declared with it): those are
// left unmanaged (-1) for the comparison and named in assumed ("owner
// app"). Any other unknown name is still an error.
func (a *Archive) assumedIDs(as *resources.Assumed) (uid, gid int, assumed []string, err error) {
	uid, gid = -1, -1
	if o := a.props.Owner; o != "" {
		if as.User(o) {
			assumed = append(assumed, "owner "+o)
		} else if uid, err = ids.UID(o); err != nil {
			return 0, 0, nil, err
		}
	}
	if g := a.props.Group; g != "" {
		if as.Group(g) {
			assumed = append(assumed, "group "+g)
		} else if gid, err = ids.GID(g); err != nil {
			return 0, 0, nil, err
		}
	}
	return uid, gid, assumed, nil
}

func idsDiffer(fi fs.FileInfo, uid, gid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	return (uid >= 0 && uint32(uid) != st.Uid) || (gid >= 0 && uint32(gid) != st.Gid)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// redact hides credentials written in a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

// scrub removes a password from an error's text.
func scrub(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "xxxxx"))
}
