package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/manifold-run/manifold/internal/facts"
)

const factsAbout = `Prints this host's facts as JSON, as a worker here would gather them:
system facts (host.info, network, cpu, memory, partition), custom facts
from --facts-dir (facts.json, facts.yaml, facts.d/*), then --fact. With
QUERY, a dotted path (host.info.platformFamily, network.interfaces.0.name),
only that fact: a string is printed bare.

Exit codes: 0 printed, 1 no fact at QUERY, 2 invalid flags or facts files.`

func runFacts(ctx context.Context, st IO, args []string) int {
	var cf compileFlags
	fs := newFlags("facts", "[flags] [QUERY]", factsAbout, st, args)
	cf.registerFacts(fs)
	noSystem := fs.Bool("no-system", false, "leave out the system facts (custom facts and --fact only)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 1 {
		fmt.Fprintln(st.Stderr, "manifold facts: want at most one QUERY argument")
		return ExitInvalid
	}
	cf.warnTo(st, "facts")
	f, err := cf.gatherFacts(ctx, !*noSystem)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold facts: %v\n", err)
		return ExitInvalid
	}
	var query string
	if len(pos) == 1 {
		query = pos[0]
	}
	v, ok := facts.Query(f, query)
	if !ok {
		fmt.Fprintf(st.Stderr, "manifold facts: no fact %q\n", query)
		return ExitFailed
	}
	if s, isString := v.(string); isString && query != "" {
		fmt.Fprintln(st.Stdout, s)
		return ExitOK
	}
	enc := json.NewEncoder(st.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(st.Stderr, "manifold facts: %v\n", err)
		return ExitFailed
	}
	return ExitOK
}
