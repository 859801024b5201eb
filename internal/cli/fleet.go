package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/facts"
	"github.com/manifold-run/manifold/worker"
)

const fleetAbout = `Lists the live hosts (workers), one line each, sorted by name: pools, a
few facts, the convergence state (the worst of its assignments: failed >
flapping > drifted > repairing > converged; none without assignments),
the drift repairs since it took its assignments' current versions, and its
last run (ID, status, when). It reads the workers bucket once (one
consumer pass, however many hosts), so it stays quick at 10,000 hosts.

Filters combine (all must hold): --where over each host's published facts
(an expr-lang expression, as run --where and assign --where take it),
--pool, --state. A filter matching no host is not an error: no lines (text;
a note on stderr) or [] (json), exit 0.

--output json prints an array of objects, one per host (docs/fleet-view.md):
{name, pools, facts: {label: value}, state, assignments: {name: {version,
state, since, drifts, drifts_since}}, drifts, drifts_since, last_run:
{run_id, status, time, trigger, assignment} or null, version, seen}.

Examples:
  manifold fleet
  manifold fleet --state failed,flapping
  manifold fleet --pool web --where "facts.host.info.platformFamily == 'debian'"
  manifold fleet --facts role,kernel=host.info.kernelVersion --output json

Exit 0 when the fleet was read, 2 for bad flags or a --where that does not
compile (or fails on every host), 3 on bus errors.`

// maxFleetFacts bounds the fact columns --facts may ask for.
const maxFleetFacts = 16

// maxFactWidth bounds a fact's width in a text column (runes); json has it
// whole.
const maxFactWidth = 40

// fleetStates are the convergence states, best first: a host's state is
// the worst of its assignments'; none when it has none.
var fleetStates = []string{"none", string(converge.StateConverged), string(converge.StateRepairing),
	string(converge.StateDrifted), string(converge.StateFlapping), string(converge.StateFailed)}

// defaultFleetFacts are the fact columns without --facts.
var defaultFleetFacts = []factColumn{
	{Label: "hostname", Path: "host.info.hostname"},
	{Label: "os", Path: "host.info.platformFamily"},
}

// factColumn is one fact shown per host: --facts LABEL=PATH or PATH (the
// label is then the path).
type factColumn struct {
	Label, Path string
}

var factLabelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]+$`) })

// parseFactColumns parses --facts: comma-separated PATH or LABEL=PATH.
func parseFactColumns(s string) ([]factColumn, error) {
	var cols []factColumn
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		label, path, ok := strings.Cut(item, "=")
		if !ok {
			path = label
		}
		label, path = strings.TrimSpace(label), strings.TrimSpace(path)
		if path == "" || slices.Contains(strings.Split(path, "."), "") {
			return nil, fmt.Errorf("--facts %q: want PATH or LABEL=PATH, a dotted fact path such as host.info.hostname", item)
		}
		if !factLabelRE().MatchString(label) {
			return nil, fmt.Errorf("--facts %q: label %q: want letters, digits, '.', '_' or '-'", item, label)
		}
		if seen[label] {
			return nil, fmt.Errorf("--facts %q: label %q given twice", item, label)
		}
		seen[label] = true
		cols = append(cols, factColumn{Label: label, Path: path})
	}
	if len(cols) > maxFleetFacts {
		return nil, fmt.Errorf("--facts: %d facts, at most %d", len(cols), maxFleetFacts)
	}
	return cols, nil
}

// FleetHost is one host of `manifold fleet --output json`, a contract:
// fields are only added.
type FleetHost struct {
	Name  string   `json:"name"`
	Pools []string `json:"pools"`
	// Facts holds the chosen facts by label; a fact the host does not
	// have is null.
	Facts map[string]any `json:"facts"`
	// State is the worst state of the host's assignments, none without.
	State       string                     `json:"state"`
	Assignments map[string]FleetAssignment `json:"assignments"`
	// Drifts is the sum of the assignments' drift repairs, DriftsSince
	// the earliest time they are counted from (null when not known).
	Drifts      int        `json:"drifts"`
	DriftsSince *time.Time `json:"drifts_since"`
	// LastRun is the host's last run (a convergence run or a run pinned
	// to it), null when it ran none since it started.
	LastRun *worker.LastRun `json:"last_run"`
	Version string          `json:"version,omitempty"`
	Seen    time.Time       `json:"seen"`
}

// FleetAssignment is a host's state of one assignment.
type FleetAssignment struct {
	Version     uint64     `json:"version"`
	State       string     `json:"state"`
	Since       time.Time  `json:"since"`
	Drifts      int        `json:"drifts"`
	DriftsSince *time.Time `json:"drifts_since,omitempty"`
}

// fleetFilter is what selects hosts; the zero value selects all.
type fleetFilter struct {
	where  string
	pools  []string
	states []string
}

// fleetEntry is the part of a worker's entry the fleet view reads. Facts
// stay raw: only the chosen ones are decoded, unless --where needs them.
type fleetEntry struct {
	Name        string                             `json:"name"`
	Pools       []string                           `json:"pools"`
	Version     string                             `json:"version"`
	Seen        time.Time                          `json:"seen"`
	Facts       json.RawMessage                    `json:"facts"`
	Assignments map[string]worker.AssignmentStatus `json:"assignments"`
	Fleet       *worker.FleetStatus                `json:"fleet"`
}

// decodeFleetEntry decodes a worker's entry but its facts, which it
// keeps as they are in data (neither copied nor checked: rawFact and the
// --where decoding read them). The facts are most of an entry's bytes;
// skipping them in place is what keeps a 10,000-host view cheap.
func decodeFleetEntry(data []byte) (fleetEntry, error) {
	var e fleetEntry
	var err error
	ok := eachField(data, func(key, val []byte) bool {
		var dst any
		switch {
		case jsonKeyIs(key, "facts"):
			e.Facts = val
			return true
		case jsonKeyIs(key, "name"):
			dst = &e.Name
		case jsonKeyIs(key, "pools"):
			dst = &e.Pools
		case jsonKeyIs(key, "version"):
			dst = &e.Version
		case jsonKeyIs(key, "seen"):
			dst = &e.Seen
		case jsonKeyIs(key, "assignments"):
			dst = &e.Assignments
		case jsonKeyIs(key, "fleet"):
			dst = &e.Fleet
		default:
			return true
		}
		if err = json.Unmarshal(val, dst); err != nil {
			err = fmt.Errorf("%s: %w", key, err)
			return false
		}
		return true
	})
	switch {
	case err != nil:
		return e, err
	case !ok:
		return e, errors.New("not a JSON object")
	case e.Name == "":
		return e, errors.New("no name")
	}
	return e, nil
}

// fleetScan is the outcome of reading the fleet: the selected hosts
// sorted by name, and what was left out and why.
type fleetScan struct {
	Hosts []FleetHost
	// Live counts the readable entries; Unreadable names the others.
	Live       int
	Unreadable []string
	// WhereTried counts the hosts --where was evaluated on (those the
	// other filters selected), WhereFailed those it failed on (left out);
	// WhereErr is the first such error.
	WhereTried, WhereFailed int
	WhereErr                error
}

// scanFleet reads the workers bucket once and returns the hosts that
// filter selects, with cols as their facts.
func scanFleet(ctx context.Context, b *bus.Bus, filter fleetFilter, cols []factColumn) (*fleetScan, error) {
	out := &fleetScan{Hosts: []FleetHost{}}
	err := b.Scan(ctx, b.Workers(), func(e bus.Entry) error {
		h, ok, err := fleetHostOf(e.Value, filter, cols, &out.WhereTried)
		if err != nil {
			if we := (*whereError)(nil); errors.As(err, &we) {
				out.Live++
				out.WhereFailed++
				if out.WhereErr == nil {
					out.WhereErr = err
				}
				return nil
			}
			out.Unreadable = append(out.Unreadable, fmt.Sprintf("%s: %v", e.Key, err))
			return nil
		}
		out.Live++
		if ok {
			out.Hosts = append(out.Hosts, h)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out.Hosts, func(a, b FleetHost) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// whereError is --where failing on one host.
type whereError struct {
	host string
	err  error
}

func (e *whereError) Error() string { return fmt.Sprintf("host %s: %v", e.host, e.err) }

// fleetHostOf decodes one worker entry and tells whether filter selects
// it; tried counts the evaluations of filter.where.
func fleetHostOf(data []byte, filter fleetFilter, cols []factColumn, tried *int) (FleetHost, bool, error) {
	e, err := decodeFleetEntry(data)
	if err != nil {
		return FleetHost{}, false, fmt.Errorf("unreadable entry: %w", err)
	}
	if len(filter.pools) > 0 && !slices.ContainsFunc(e.Pools, func(p string) bool { return slices.Contains(filter.pools, p) }) {
		return FleetHost{}, false, nil
	}
	h := FleetHost{Name: e.Name, Pools: e.Pools, Facts: make(map[string]any, len(cols)), State: "none",
		Assignments: make(map[string]FleetAssignment, len(e.Assignments)), Version: e.Version, Seen: e.Seen}
	if h.Pools == nil {
		h.Pools = []string{}
	}
	for name, a := range e.Assignments {
		fa := FleetAssignment{Version: a.Version, State: string(a.State), Since: a.Since}
		if e.Fleet != nil {
			if d, ok := e.Fleet.Drifts[name]; ok {
				fa.Drifts, fa.DriftsSince = d.Count, &d.Since
				h.Drifts += d.Count
				if h.DriftsSince == nil || d.Since.Before(*h.DriftsSince) {
					since := d.Since
					h.DriftsSince = &since
				}
			}
		}
		h.Assignments[name] = fa
		if stateRank(fa.State) > stateRank(h.State) {
			h.State = fa.State
		}
	}
	if len(filter.states) > 0 && !slices.Contains(filter.states, h.State) {
		return FleetHost{}, false, nil
	}
	if e.Fleet != nil {
		h.LastRun = e.Fleet.LastRun
	}
	if filter.where != "" {
		var all map[string]any
		if len(e.Facts) > 0 {
			if err := json.Unmarshal(e.Facts, &all); err != nil {
				return FleetHost{}, false, fmt.Errorf("unreadable facts: %w", err)
			}
		}
		*tried++
		ok, err := coordinator.WhereHolds(filter.where, all)
		if err != nil {
			return FleetHost{}, false, &whereError{host: e.Name, err: err}
		}
		if !ok {
			return FleetHost{}, false, nil
		}
		for _, c := range cols {
			h.Facts[c.Label], _ = facts.Query(all, c.Path)
		}
		return h, true, nil
	}
	for _, c := range cols {
		h.Facts[c.Label] = rawFact(e.Facts, c.Path)
	}
	return h, true, nil
}

// stateRank orders states best to worst (fleetStates); an unknown state
// ranks as repairing: neither good nor known bad.
func stateRank(s string) int {
	if i := slices.Index(fleetStates, s); i >= 0 {
		return i
	}
	return slices.Index(fleetStates, string(converge.StateRepairing))
}

// rawFact decodes only the fact at path (keys through objects, indexes
// through arrays) from raw facts, nil when there is none. A host's facts
// are kilobytes and a fleet view wants a few of them: the value is found
// by skipping over the others in place (raw is valid JSON: it was
// decoded as part of the entry), with no allocation but the value's.
func rawFact(raw json.RawMessage, path string) any {
	cur := []byte(raw)
	for seg := range strings.SplitSeq(path, ".") {
		var ok bool
		if cur, ok = jsonChild(cur, seg); !ok {
			return nil
		}
	}
	var v any
	if json.Unmarshal(cur, &v) != nil {
		return nil
	}
	return v
}

// jsonChild returns the raw value of key seg in the JSON object v, or of
// index seg in the JSON array v.
func jsonChild(v []byte, seg string) ([]byte, bool) {
	i := skipSpace(v, 0)
	if i >= len(v) {
		return nil, false
	}
	switch v[i] {
	case '{':
		var found []byte
		eachField(v, func(key, val []byte) bool {
			if jsonKeyIs(key, seg) {
				found = val
				return false
			}
			return true
		})
		return found, found != nil
	case '[':
		n, err := strconv.Atoi(seg)
		if err != nil || n < 0 {
			return nil, false
		}
		for i = skipSpace(v, i+1); i < len(v) && v[i] != ']'; n-- {
			vEnd := skipValue(v, i)
			if n == 0 {
				return v[i:vEnd], true
			}
			i = skipSpace(v, vEnd)
			if i >= len(v) || v[i] != ',' {
				return nil, false
			}
			i = skipSpace(v, i+1)
		}
	}
	return nil, false
}

// eachField calls fn with each key (quoted) and raw value of the JSON
// object v, in order, until fn returns false. It reports whether v is an
// object whose fields it could read to the end (or to fn's stop). Values
// are skipped over, not checked: a caller decoding one checks it.
func eachField(v []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		return false
	}
	for i = skipSpace(v, i+1); i < len(v) && v[i] == '"'; {
		kEnd := skipString(v, i)
		key := v[i:kEnd]
		i = skipSpace(v, kEnd)
		if i >= len(v) || v[i] != ':' {
			return false
		}
		i = skipSpace(v, i+1)
		vEnd := skipValue(v, i)
		if vEnd == i {
			return false
		}
		if !fn(key, v[i:vEnd]) {
			return true
		}
		i = skipSpace(v, vEnd)
		if i < len(v) && v[i] == '}' {
			return true
		}
		if i >= len(v) || v[i] != ',' {
			return false
		}
		i = skipSpace(v, i+1)
	}
	return i < len(v) && v[i] == '}'
}

// jsonKeyIs compares a quoted JSON key with s (unquoting only keys with
// escapes).
func jsonKeyIs(quoted []byte, s string) bool {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return len(quoted) >= 2 && string(quoted[1:len(quoted)-1]) == s
	}
	var k string
	return json.Unmarshal(quoted, &k) == nil && k == s
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at v[i] ('"').
func skipString(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(v)
}

// skipValue returns the index after the value starting at v[i].
func skipValue(v []byte, i int) int {
	if i >= len(v) {
		return i
	}
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for i < len(v) {
			switch v[i] {
			case '"':
				i = skipString(v, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(v)
	}
	for i < len(v) && !strings.ContainsRune(",}] \t\r\n", rune(v[i])) {
		i++
	}
	return i
}

func runFleet(ctx context.Context, st IO, args []string) int {
	var (
		conn          connFlags
		where         string
		pools, states listFlag
		factsFlag     string
	)
	output := choice{"text", []string{"text", "json"}}
	fs := newFlags("fleet", "[--server URL] [--where EXPR] [--pool P] [--state S] [--facts a,b] [--output json]", fleetAbout, st, args)
	conn.register(fs)
	fs.StringVar(&where, "where", "", "only hosts whose published facts make this expression true (expr-lang, as run --where), e.g. facts.role == 'db'")
	fs.Var(&pools, "pool", "only hosts in this pool; repeatable or comma-separated (any of them)")
	fs.Var(&states, "state", "only hosts in this state: "+strings.Join(fleetStates, ", ")+"; repeatable or comma-separated (any of them)")
	fs.StringVar(&factsFlag, "facts", "hostname=host.info.hostname,os=host.info.platformFamily",
		fmt.Sprintf("facts to show, comma-separated PATH or LABEL=PATH (dotted paths as in 'manifold facts'), at most %d; \"\" for none", maxFleetFacts))
	fs.Var(&output, "output", "output format: text (aligned columns under a header) or json (an array of hosts)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(st.Stderr, "manifold fleet: want no arguments, got %d\n", len(pos))
		fs.Usage()
		return ExitInvalid
	}
	cols, err := parseFactColumns(factsFlag)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold fleet: %v\n", err)
		return ExitInvalid
	}
	for _, s := range states {
		if !slices.Contains(fleetStates, s) {
			fmt.Fprintf(st.Stderr, "manifold fleet: --state %q: want one of %s\n", s, strings.Join(fleetStates, ", "))
			return ExitInvalid
		}
	}
	where = strings.TrimSpace(where)
	if where != "" {
		if err := coordinator.CheckWhere(where); err != nil {
			fmt.Fprintf(st.Stderr, "manifold fleet: --where %q: %v\n", where, err)
			return ExitInvalid
		}
	}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, err := conn.attach(ctx, st, "manifold-fleet")
	if err != nil {
		return connExit(st, "fleet", err)
	}
	defer b.Conn().Close()
	res, err := scanFleet(ctx, b, fleetFilter{where: where, pools: pools, states: states}, cols)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold fleet: %v\n", err)
		return ExitUnavailable
	}
	for _, u := range res.Unreadable {
		fmt.Fprintf(st.Stderr, "manifold fleet: %s (left out)\n", u)
	}
	if res.WhereFailed > 0 {
		fmt.Fprintf(st.Stderr, "manifold fleet: --where %q failed on %d of %d hosts, left out (first: %v)\n", where, res.WhereFailed, res.WhereTried, res.WhereErr)
		if res.WhereFailed == res.WhereTried {
			return ExitInvalid
		}
	}
	if output.value == "json" {
		printJSON(st.Stdout, res.Hosts)
		return ExitOK
	}
	if len(res.Hosts) == 0 {
		fmt.Fprintf(st.Stderr, "manifold fleet: no host matches (of %d live)\n", res.Live)
		return ExitOK
	}
	printFleet(st.Stdout, res.Hosts, cols, time.Now())
	return ExitOK
}

// printFleet prints hosts as aligned columns under a header.
func printFleet(w io.Writer, hosts []FleetHost, cols []factColumn, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := []string{"NAME", "POOLS"}
	for _, c := range cols {
		header = append(header, strings.ToUpper(c.Label))
	}
	header = append(header, "STATE", "DRIFTS", "SINCE", "LAST RUN", "RUN STATUS", "RUN AT")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, h := range hosts {
		row := []string{h.Name, cmp.Or(strings.Join(h.Pools, ","), "-")}
		for _, c := range cols {
			row = append(row, factCell(h.Facts[c.Label]))
		}
		row = append(row, h.State, strconv.Itoa(h.Drifts), ago(h.DriftsSince, now))
		if h.LastRun != nil {
			row = append(row, h.LastRun.RunID, h.LastRun.Status, ago(&h.LastRun.Time, now))
		} else {
			row = append(row, "-", "-", "-")
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
}

// ago prints how long before now t was ("-" for none).
func ago(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return max(now.Sub(*t), 0).Round(time.Second).String() + " ago"
}

// factCell prints a fact in one text cell: "-" when missing, lists and
// maps as compact JSON, whitespace flattened, at most maxFactWidth runes.
func factCell(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		s = x
	case map[string]any, []any:
		data, _ := json.Marshal(x)
		s = string(data)
	default:
		s = fmt.Sprint(x)
	}
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return `""`
	}
	if utf8.RuneCountInString(s) > maxFactWidth {
		r := []rune(s)
		s = string(r[:maxFactWidth-1]) + "…"
	}
	return s
}
