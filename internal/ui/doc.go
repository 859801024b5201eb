// Package ui is manifold's read-only web view, served by `manifold ui`:
// the fleet (workers, pools, convergence state, last runs) at /, the runs
// at /runs (newest first, ?status= filter) and one run at /runs/RUN: its
// resource graph coloured by status as inline SVG, each resource's
// outcome, diff, duration and error, and a link to its trace in Jaeger.
// A run's page follows it live while it runs (a small script polls
// /runs/RUN/live, a fragment of the page). Pages are rendered on the
// server with html/template; the stylesheet and the script are embedded:
// nothing is loaded from the internet.
//
// The server only reads: it handles GET and HEAD, reads the bus with the
// credentials it was started with, and writes nothing.
package ui
