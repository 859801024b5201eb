package hiera

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// MaxSourceBytes bounds one hiera source: 4 MiB, as a --data-file.
const MaxSourceBytes = 4 << 20

// SourceOpts are how FetchSource reaches a source.
type SourceOpts struct {
	// HTTPClient fetches https:// sources. Defaults to a client with a
	// 30s timeout (the system's CAs).
	HTTPClient *http.Client
	// KV reads the value of key in the NATS KV bucket of a
	// kv://BUCKET/KEY source; found is false for a missing key. Nil
	// refuses kv:// sources (no NATS connection).
	KV func(ctx context.Context, bucket, key string) (value []byte, found bool, err error)
	// MaxBytes bounds a source. Defaults to MaxSourceBytes.
	MaxBytes int64
}

// FetchSource reads a hiera source, as CCM's --hiera names one: a file
// path (or file://PATH), kv://BUCKET/KEY (a value in a NATS KV bucket)
// or https://URL (user:password@ in the URL is sent as basic
// authentication). http:// is refused: the document decides what runs.
// A source over MaxBytes, a missing file or key and a reply other than
// 200 are errors naming the source (never its password).
func FetchSource(ctx context.Context, source string, o SourceOpts) ([]byte, error) {
	limit := cmp.Or(o.MaxBytes, MaxSourceBytes)
	u, err := url.Parse(source)
	if err != nil || len(u.Scheme) < 2 { // a Windows drive letter is not a scheme
		return readFileBounded(source, limit)
	}
	shown := u.Redacted()
	switch u.Scheme {
	case "file":
		return readFileBounded(u.Path, limit)
	case "kv":
		bucket, key := u.Host, strings.TrimPrefix(u.Path, "/")
		if bucket == "" || key == "" {
			return nil, fmt.Errorf("%w %s: want kv://BUCKET/KEY", ErrSource, shown)
		}
		if o.KV == nil {
			return nil, fmt.Errorf("%w %s: a kv:// source needs a NATS connection (--server or --context)", ErrSource, shown)
		}
		v, found, err := o.KV(ctx, bucket, key)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrSource, shown, err)
		}
		if !found {
			return nil, fmt.Errorf("%w %s: no key %q in bucket %s", ErrSource, shown, key, bucket)
		}
		if int64(len(v)) > limit {
			return nil, fmt.Errorf("%w %s: larger than the limit of %d bytes", ErrSource, shown, limit)
		}
		return v, nil
	case "https":
		return fetchHTTPS(ctx, u, o.HTTPClient, limit)
	case "http":
		return nil, fmt.Errorf("%w %s: use https:// (a hiera document decides what runs; plain HTTP lets anyone on the path change it)", ErrSource, shown)
	}
	return nil, fmt.Errorf("%w %s: unknown scheme %q (a path, file://, kv:// or https://)", ErrSource, shown, u.Scheme)
}

func fetchHTTPS(ctx context.Context, u *url.URL, client *http.Client, limit int64) ([]byte, error) {
	shown := u.Redacted()
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	bare := *u
	bare.User = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, bare.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrSource, shown, err)
	}
	// The client drops the header on a redirect to another host.
	if u.User != nil {
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrSource, shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w %s: %s", ErrSource, shown, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrSource, shown, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w %s: larger than the limit of %d bytes", ErrSource, shown, limit)
	}
	return b, nil
}

// readFileBounded reads a file of at most limit bytes.
func readFileBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSource, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrSource, path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w %s: larger than the limit of %d bytes", ErrSource, path, limit)
	}
	return b, nil
}
