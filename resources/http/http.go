package http

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/manifold-run/manifold/resources"
)

// Type is the resource type name, as written in manifests.
const Type = "http"

const (
	// DefaultRequestTimeout bounds one request (connect, send, read the
	// response) when request_timeout is not set.
	DefaultRequestTimeout = 30 * time.Second
	// MaxRequestTimeout is the largest request_timeout accepted.
	MaxRequestTimeout = 10 * time.Minute
	// MaxBodyBytes bounds the response body read for a match (1 MiB); a
	// longer body is matched on its first MaxBodyBytes.
	MaxBodyBytes = 1 << 20
	// maxSnippet bounds the part of a response body quoted in an error.
	maxSnippet = 256
)

// Statuses is a list of expected status codes; empty means any 2xx. It
// decodes from a number or a list of numbers.
type Statuses []int

// UnmarshalJSON accepts 200 or [200, 204].
func (s *Statuses) UnmarshalJSON(b []byte) error {
	var one int
	if err := json.Unmarshal(b, &one); err == nil {
		*s = Statuses{one}
		return nil
	}
	var many []int
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

// ok reports whether code is expected.
func (s Statuses) ok(code int) bool {
	if len(s) == 0 {
		return code >= 200 && code <= 299
	}
	return slices.Contains(s, code)
}

func (s Statuses) String() string {
	if len(s) == 0 {
		return "2xx"
	}
	return fmt.Sprint([]int(s))
}

// Expect is what a response must show: a status and, optionally, a body
// matching a regular expression.
type Expect struct {
	// Status lists the expected status codes; empty means any 2xx.
	Status Statuses `json:"status,omitempty"`
	// Match is a regular expression (Go RE2 syntax) the response body must
	// match somewhere; empty means any body. Use (?s) to let . span lines
	// and \Q...\E for a literal substring.
	Match string `json:"match,omitempty"`
}

// Guard is the unless property: a GET whose response, when it shows what
// Expect says, means the request need not be sent.
type Guard struct {
	// URL is the address to GET; empty means the resource's url.
	URL string `json:"url,omitempty"`
	// Headers are the guard's request headers; nil means the resource's.
	Headers map[string]string `json:"headers,omitempty"`
	Expect
}

// Properties are the http type's properties.
type Properties struct {
	// URL is the http or https address; empty means the resource's name.
	URL string `json:"url,omitempty"`
	// Method is the request method; empty means GET.
	Method string `json:"method,omitempty"`
	// Headers are request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the request body.
	Body string `json:"body,omitempty"`
	// Expect: the response's status and body match.
	Expect
	// Unless is the guard of a request that changes something.
	Unless *Guard `json:"unless,omitempty"`
	// Always marks a request that is sent on every run (a webhook): it is
	// never stable.
	Always bool `json:"always,omitempty"`
	// RefreshOnly sends the request only when refreshed.
	RefreshOnly bool `json:"refreshonly,omitempty"`
	// RequestTimeout bounds each request, a Go duration; empty means
	// DefaultRequestTimeout.
	RequestTimeout string `json:"request_timeout,omitempty"`
}

// HTTP is an http resource. Build it with New.
type HTTP struct {
	name    string
	ensure  string
	props   Properties
	match   *regexp.Regexp
	guardRe *regexp.Regexp
	timeout time.Duration
}

var (
	_ resources.Resource  = (*HTTP)(nil)
	_ resources.Refresher = (*HTTP)(nil)
	_ resources.Rechecker = (*HTTP)(nil)
	_ resources.Factory   = New
)

// New is the http type's resources.Factory: it decodes spec's properties.
func New(spec resources.Spec) (resources.Resource, error) {
	h := &HTTP{name: spec.Name, ensure: spec.Ensure, timeout: DefaultRequestTimeout}
	if err := resources.DecodeProperties(spec.Properties, &h.props); err != nil {
		return nil, err
	}
	if h.props.URL == "" {
		h.props.URL = spec.Name
	}
	h.props.Method = strings.ToUpper(h.props.Method)
	if h.props.Method == "" {
		h.props.Method = nethttp.MethodGet
	}
	return h, nil
}

// safe reports whether the request only reads (GET, HEAD): it is then sent
// in check, and its expectations are the resource's state.
func (h *HTTP) safe() bool {
	return h.props.Method == nethttp.MethodGet || h.props.Method == nethttp.MethodHead
}

// Validate checks the properties without touching the network.
func (h *HTTP) Validate() error {
	if h.ensure != "" && h.ensure != "present" {
		return fmt.Errorf("ensure %q: http supports only present", h.ensure)
	}
	if err := checkURL("url", h.props.URL); err != nil {
		return err
	}
	if !validMethod(h.props.Method) {
		return fmt.Errorf("method %q: not a valid HTTP method", h.props.Method)
	}
	var err error
	if h.match, err = compile("match", h.props.Match); err != nil {
		return err
	}
	if g := h.props.Unless; g != nil {
		if g.URL != "" {
			if err := checkURL("unless.url", g.URL); err != nil {
				return err
			}
		}
		if h.guardRe, err = compile("unless.match", g.Match); err != nil {
			return err
		}
		if h.props.Always {
			return errors.New("unless and always are mutually exclusive")
		}
	}
	if !h.safe() && h.props.Unless == nil && !h.props.Always && !h.props.RefreshOnly {
		return fmt.Errorf("method %s: %w", h.props.Method, ErrNotIdempotent)
	}
	if t := h.props.RequestTimeout; t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 || d > MaxRequestTimeout {
			return fmt.Errorf("request_timeout %q: want a duration above 0 and at most %s", t, MaxRequestTimeout)
		}
		h.timeout = d
	}
	return nil
}

func checkURL(prop, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		red := "(unparsable)"
		if err == nil {
			red = u.Redacted()
		}
		return fmt.Errorf("%s %q: want an http:// or https:// address", prop, red)
	}
	return nil
}

func compile(prop, re string) (*regexp.Regexp, error) {
	if re == "" {
		return nil, nil
	}
	r, err := regexp.Compile(re)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", prop, err)
	}
	return r, nil
}

func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// Refreshable reports true: a refresh sends the request whatever the guard
// says (as for exec).
func (h *HTTP) Refreshable() bool { return true }

// Recheck is true for a request with an unless guard, so the engine
// confirms the guard holds after the request; false otherwise (sending an
// always request again to check it would send it twice).
func (h *HTTP) Recheck() bool { return h.props.Unless != nil }

// CheckApply decides whether the request is sent and, with apply, sends it.
//
//   - GET or HEAD without unless: the request is the check, sent in noop
//     too; stable when the response is as expected, failed otherwise.
//   - refreshonly: stable until refreshed.
//   - unless: a GET, sent in check (and noop); stable when it shows what
//     unless expects.
//   - always: changed on every run.
//
// A refresh sends the request whatever unless says. Apply sends it and
// fails unless the response is as expected (ErrStatus, ErrNoMatch).
func (h *HTTP) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	refresh := env != nil && env.Refresh
	switch {
	case refresh:
	case h.props.RefreshOnly:
		return resources.Result{Message: "refreshonly: waiting for a refresh"}, nil
	case h.props.Unless != nil:
		g := h.props.Unless
		u := cmp.Or(g.URL, h.props.URL)
		headers := g.Headers
		if headers == nil {
			headers = h.props.Headers
		}
		if err := h.do(ctx, nethttp.MethodGet, u, headers, "", g.Expect, h.guardRe); err == nil {
			return resources.Result{Message: "unless GET " + redact(u) + " matched"}, nil
		} else if !errors.Is(err, ErrStatus) && !errors.Is(err, ErrNoMatch) {
			return resources.Result{}, fmt.Errorf("unless: %w", err)
		}
	case h.safe() && !h.props.Always:
		if err := h.send(ctx); err != nil {
			return resources.Result{}, err
		}
		return resources.Result{Message: h.props.Method + " " + redact(h.props.URL) + " as expected"}, nil
	}
	what := h.props.Method + " " + redact(h.props.URL)
	if !apply {
		return resources.Result{Changed: true, Message: "send " + what}, nil
	}
	if err := h.send(ctx); err != nil {
		return resources.Result{}, err
	}
	return resources.Result{Changed: true, Message: "sent " + what}, nil
}

func (h *HTTP) send(ctx context.Context) error {
	return h.do(ctx, h.props.Method, h.props.URL, h.props.Headers, h.props.Body, h.props.Expect, h.match)
}

// do sends one request, bounded by the request timeout, and checks the
// response against exp and re.
func (h *HTTP) do(ctx context.Context, method, u string, headers map[string]string, body string, exp Expect, re *regexp.Regexp) error {
	ctx, cancel := context.WithTimeoutCause(ctx, h.timeout, fmt.Errorf("request timed out after %s", h.timeout))
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := nethttp.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, redact(u), err)
	}
	for k, v := range headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return fmt.Errorf("%s %s: %w", method, redact(u), stripURL(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
	if err != nil {
		return fmt.Errorf("%s %s: reading the response: %w", method, redact(u), err)
	}
	if !exp.Status.ok(resp.StatusCode) {
		return fmt.Errorf("%s %s: %w %d, want %s: %s", method, redact(u), ErrStatus, resp.StatusCode, exp.Status, snippet(b))
	}
	if re != nil && !re.Match(b) {
		return fmt.Errorf("%s %s: %w %q: %s", method, redact(u), ErrNoMatch, re.String(), snippet(b))
	}
	return nil
}

// client bounds connecting and keeps the manifest's headers from the hosts
// a redirect leads to (CheckRedirect); each request is bounded by its own
// timeout.
var client = &nethttp.Client{CheckRedirect: CheckRedirect, Transport: &nethttp.Transport{
	Proxy:                 nethttp.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: DefaultRequestTimeout}).DialContext,
	TLSHandshakeTimeout:   DefaultRequestTimeout,
	ForceAttemptHTTP2:     true,
	MaxIdleConnsPerHost:   2,
	IdleConnTimeout:       30 * time.Second,
	ResponseHeaderTimeout: MaxRequestTimeout,
}}

// snippet quotes the start of a body for an error.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > maxSnippet {
		return fmt.Sprintf("%q...", b[:maxSnippet])
	}
	return fmt.Sprintf("%q", b)
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

// stripURL drops the *url.Error wrapper, whose text repeats the URL with
// its credentials.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
