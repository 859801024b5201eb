// Package http is the `http` resource type, manifold's own: one HTTP
// request, for webhooks and readiness checks in workflows.
//
// Properties: url (defaults to the resource's name), method (GET), headers,
// body, status (expected codes, a number or a list; default any 2xx), match
// (a Go regular expression the response body must match; \Q...\E for a
// literal substring), unless (a guard: {url, headers, status, match}),
// always, refreshonly and request_timeout (a Go duration, default
// DefaultRequestTimeout, at most MaxRequestTimeout).
//
// Idempotence comes from the request or its guard:
//   - GET and HEAD only read, so without unless the request is the check:
//     it is sent in check and noop too, the resource is stable when the
//     response is as expected and failed otherwise (a readiness check; use
//     the common retry property to wait).
//   - Other methods need unless or always (Validate fails with
//     ErrNotIdempotent otherwise). unless is a GET sent in check (and
//     noop); when its response is as unless expects, the request is not
//     sent. After sending, the engine re-checks, so a request that did not
//     bring the guard about fails as not converged.
//   - always sends the request on every run (never in noop) and is changed
//     every time; refreshonly sends it only when a subscribed resource
//     changed. A refresh sends it whatever unless says.
//
// Redirects (at most MaxRedirects) to another host name, or from https to
// http, carry none of the headers the manifest set (CheckRedirect); a
// 307/308 that would resend the body there fails with ErrCrossHostBody.
//
// Response bodies are read up to MaxBodyBytes; errors quote their first 256
// bytes. URLs in messages have their credentials redacted; header values
// and the request body are never shown.
package http
