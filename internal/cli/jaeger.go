package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// jaegerURLFlag registers --jaeger-url on fs; its default is
// MANIFOLD_JAEGER_URL. The text outputs then link the run's trace.
func jaegerURLFlag(fs *flag.FlagSet, st IO, dst *string) {
	fs.StringVar(dst, "jaeger-url", st.Getenv("MANIFOLD_JAEGER_URL"),
		"Jaeger UI base URL (http://host:16686): print a link to the run's trace (default: $MANIFOLD_JAEGER_URL)")
}

// printTrace prints the run's trace line: "trace <id>", followed by
// "<jaegerURL>/trace/<id>" when a Jaeger URL is set. Nothing without a
// trace ID.
func printTrace(w io.Writer, traceID, jaegerURL string) {
	if traceID == "" {
		return
	}
	if jaegerURL == "" {
		fmt.Fprintf(w, "trace %s\n", traceID)
		return
	}
	fmt.Fprintf(w, "trace %s %s/trace/%s\n", traceID, strings.TrimRight(jaegerURL, "/"), traceID)
}
