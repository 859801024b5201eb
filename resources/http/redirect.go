package http

import (
	"errors"
	"fmt"
	nethttp "net/http"
	"strings"
)

// MaxRedirects is the number of redirects a request follows before it
// fails (Go's default).
const MaxRedirects = 10

// ErrCrossHostBody is the error of a 307 or 308 redirect to another host
// or from https to http, which would send the request body there again.
var ErrCrossHostBody = errors.New("refusing to send the request body again to another host")

// CheckRedirect is an http.Client CheckRedirect that keeps the headers a
// manifest set (tokens, API keys) from reaching anyone but the host they
// were written for. Go's client drops Authorization, Cookie and
// WWW-Authenticate on a redirect to another domain but forwards every other
// header; CheckRedirect drops them all, Referer included, whenever the
// redirect leaves the first request's host name (compared exactly, no
// subdomains) or goes from https to http. A redirect that keeps the host
// (another port or path included) keeps the headers. A 307 or 308 redirect
// that would send a body to another host fails with ErrCrossHostBody. It
// stops after MaxRedirects redirects.
func CheckRedirect(req *nethttp.Request, via []*nethttp.Request) error {
	if len(via) >= MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	first := via[0].URL
	if sameHost(first.Scheme, first.Hostname(), req.URL.Scheme, req.URL.Hostname()) {
		return nil
	}
	if req.Body != nil && req.Body != nethttp.NoBody {
		return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), ErrCrossHostBody)
	}
	req.Header = nethttp.Header{}
	return nil
}

// sameHost reports whether a redirect from (scheme, host) to (toScheme,
// toHost) keeps the host name and does not go from https to http.
func sameHost(scheme, host, toScheme, toHost string) bool {
	if strings.EqualFold(scheme, "https") && !strings.EqualFold(toScheme, "https") {
		return false
	}
	return strings.EqualFold(strings.TrimSuffix(host, "."), strings.TrimSuffix(toHost, "."))
}
