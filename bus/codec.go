package bus

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/manifold-run/manifold/schemas"
)

// Hand-written decoders of the messages read once per resource: a task
// (a segment of up to 256 resources) on a worker, an outcome or an
// outcome batch on a coordinator. They give what encoding/json's
// Unmarshal gives, without its reflection, or give up: anything they do
// not take exactly as encoding/json would (a syntax error, a value of
// another type than its field's, a number that is not a plain integer in
// an integer field, a key matching a field only in another case, a field
// given twice) makes the caller decode the whole message with
// encoding/json instead, which then decides (and words the error). So the
// result is always encoding/json's (TestCodecMatchesEncodingJSON); and
// the fast path is the messages the engine itself writes.

// decodeTaskFast decodes a task message into t, which must be zero. It
// reports false (t then undefined) when encoding/json must decide.
func decodeTaskFast(data []byte, t *Task) bool {
	d := decoder{data: data}
	if !d.task(t) {
		return false
	}
	d.ws()
	return d.i == len(d.data)
}

// decodeOutcomeFast decodes an outcome or outcome batch message into o,
// which must be zero, as decodeTaskFast.
func decodeOutcomeFast(data []byte, o *Outcome) bool {
	d := decoder{data: data}
	if !d.outcome(o, 0) {
		return false
	}
	d.ws()
	return d.i == len(d.data)
}

// maxCodecDepth bounds the nesting the fast decoders follow (encoding/json
// allows 10,000): deeper documents go to encoding/json.
const maxCodecDepth = 512

// decoder reads JSON from data at i.
type decoder struct {
	data  []byte
	i     int
	depth int
	// strs keeps the short strings decoded so far, by a hash of their
	// bytes: a segment repeats its type, ensure, owner, property names
	// and run ID in every item, and each is allocated once.
	strs [64]string
	// boxes holds strs[i] as an any once a value of a map needed it so
	// (a segment's owner, group and mode in every item's properties).
	boxes [64]any
}

// maxSegmentItems bounds the room made for a segment's items before they
// are read (a coordinator sends at most 1,024 resources a segment in
// manifest ordering: room for 256 grew the slice three times more).
const maxSegmentItems = 1024

// maxInterned is the longest string kept in decoder.strs.
const maxInterned = 32

// intern returns raw as a string, the one kept for equal bytes if any.
func (d *decoder) intern(raw []byte) string {
	s, _ := d.internAt(raw)
	return s
}

// internAt is intern, with the slot of strs holding the string (-1: not
// kept).
func (d *decoder) internAt(raw []byte) (string, int) {
	if len(raw) > maxInterned || len(raw) == 0 {
		return string(raw), -1
	}
	h := uint32(2166136261)
	for _, c := range raw {
		h = (h ^ uint32(c)) * 16777619
	}
	i := int(h % uint32(len(d.strs)))
	if d.strs[i] != string(raw) {
		d.strs[i], d.boxes[i] = string(raw), nil
	}
	return d.strs[i], i
}

// internAny is intern's string as an any, boxed once per kept string.
func (d *decoder) internAny(raw []byte) any {
	s, i := d.internAt(raw)
	if i < 0 {
		return s
	}
	if d.boxes[i] == nil {
		d.boxes[i] = s
	}
	return d.boxes[i]
}

func (d *decoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, 0 at the end.
func (d *decoder) peek() byte {
	d.ws()
	if d.i >= len(d.data) {
		return 0
	}
	return d.data[d.i]
}

// lit consumes the literal s (true, false, null).
func (d *decoder) lit(s string) bool {
	if len(d.data)-d.i < len(s) || string(d.data[d.i:d.i+len(s)]) != s {
		return false
	}
	d.i += len(s)
	return true
}

// null consumes a null if one is next.
func (d *decoder) null() bool {
	return d.peek() == 'n' && d.lit("null")
}

// object reads an object, calling field for each key with the decoder
// at its value (field reads it). A key that is not exactly one of names
// but matches one in another case fails (encoding/json folds case); any
// other unknown key's value is skipped. seen (one bit per index in names)
// fails a key given twice.
func (d *decoder) object(names []string, field func(k int) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.depth++; d.depth > maxCodecDepth {
		return false
	}
	var seen uint64
	if d.peek() == '}' {
		d.i++
		d.depth--
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		raw, esc, ok := d.stringRaw()
		if !ok {
			return false
		}
		key := string(raw) // not allocated: compared only
		if esc {
			if key, ok = unquote(raw); !ok {
				return false
			}
		}
		if d.peek() != ':' {
			return false
		}
		d.i++
		k := -1
		for j, n := range names {
			if n == key {
				k = j
				break
			}
		}
		if k < 0 {
			if foldsToAny(key, names) {
				return false
			}
			if !d.skip() {
				return false
			}
		} else {
			if seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
			if !field(k) {
				return false
			}
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return true
		default:
			return false
		}
	}
}

// foldsToAny reports whether key might match one of names as
// encoding/json matches keys (case-insensitively, with Unicode folds such
// as the Kelvin sign for k): any key of non-ASCII bytes might.
func foldsToAny(key string, names []string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, n := range names {
		if len(n) != len(key) {
			continue
		}
		same := true
		for i := 0; i < len(n) && same; i++ {
			a, b := n[i], key[i]
			if 'A' <= a && a <= 'Z' {
				a += 'a' - 'A'
			}
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			same = a == b
		}
		if same {
			return true
		}
	}
	return false
}

// stringRaw reads a string token and returns the bytes between its
// quotes, whether they hold a backslash or bytes that unquote must
// rewrite (non-ASCII: invalid UTF-8 becomes U+FFFD).
func (d *decoder) stringRaw() (raw []byte, slow bool, ok bool) {
	if d.peek() != '"' {
		return nil, false, false
	}
	start := d.i + 1
	data := d.data
	for i := start; i < len(data); i++ {
		if plainByte[data[i]] {
			continue
		}
		switch c := data[i]; {
		case c == '"':
			d.i = i + 1
			raw = data[start:i]
			if slow && !hasEscape(raw) && utf8.Valid(raw) {
				slow = false
			}
			return raw, slow, true
		case c == '\\':
			slow = true
			i++
		case c < 0x20:
			return nil, false, false
		default: // c >= utf8.RuneSelf
			slow = true
		}
	}
	return nil, false, false
}

// plainByte are the bytes a string holds as they are: not a quote, a
// backslash, a control character or part of a multi-byte sequence.
var plainByte = func() (plain [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
	}
	return plain
}()

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// str reads a string value (null leaves *s as it is).
func (d *decoder) str(s *string) bool {
	if d.null() {
		return true
	}
	raw, slow, ok := d.stringRaw()
	if !ok {
		return false
	}
	if slow {
		*s, ok = unquote(raw)
		return ok
	}
	*s = d.intern(raw)
	return true
}

// unquote decodes the inside of a JSON string as encoding/json does:
// escapes, surrogate pairs (a lone surrogate is U+FFFD), invalid UTF-8
// bytes each U+FFFD. It fails on what its scanner refuses.
func unquote(s []byte) (string, bool) {
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			if r >= len(s) {
				return "", false
			}
			switch s[r] {
			case '"', '\\', '/':
				b = append(b, s[r])
				r++
			case 'b':
				b = append(b, '\b')
				r++
			case 'f':
				b = append(b, '\f')
				r++
			case 'n':
				b = append(b, '\n')
				r++
			case 'r':
				b = append(b, '\r')
				r++
			case 't':
				b = append(b, '\t')
				r++
			case 'u':
				r--
				rr := getu4(s[r:])
				if rr < 0 {
					return "", false
				}
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := getu4(s[r:])
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						break
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
			default:
				return "", false
			}
		case c == '"' || c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	if len(b) == 0 {
		return "", true
	}
	// b is this string's own and never written again: no copy.
	return unsafe.String(unsafe.SliceData(b), len(b)), true
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// number reads a number token (JSON's grammar) and returns its text.
func (d *decoder) number() ([]byte, bool) {
	d.ws()
	s, i := d.data, d.i
	start := i
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return nil, false
		}
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return nil, false
		}
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	}
	d.i = i
	return s[start:i], true
}

// int64 reads an integer (null leaves *v): a number with a fraction or
// an exponent, or out of range, fails as encoding/json refuses it.
func (d *decoder) int64(v *int64) bool {
	if d.null() {
		return true
	}
	s, ok := d.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		return false
	}
	*v = n
	return true
}

func (d *decoder) int(v *int) bool {
	var n int64
	if !d.int64(&n) {
		return false
	}
	if int64(int(n)) != n {
		return false
	}
	*v = int(n)
	return true
}

// bool reads true or false (null leaves *v).
func (d *decoder) bool(v *bool) bool {
	switch d.peek() {
	case 't':
		*v = true
		return d.lit("true")
	case 'f':
		*v = false
		return d.lit("false")
	case 'n':
		return d.lit("null")
	}
	return false
}

// any reads any value as encoding/json reads one into an interface{}:
// map[string]any, []any, string, float64, bool or nil.
func (d *decoder) any() (any, bool) {
	switch d.peek() {
	case '{':
		return d.mapAny(nil)
	case '[':
		return d.sliceAny()
	case '"':
		raw, slow, ok := d.stringRaw()
		if !ok {
			return nil, false
		}
		if slow {
			return unquote(raw)
		}
		return d.internAny(raw), true
	case 't':
		return true, d.lit("true")
	case 'f':
		return false, d.lit("false")
	case 'n':
		return nil, d.lit("null")
	}
	s, ok := d.number()
	if !ok {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// mapAny reads an object into m (a new map when nil).
func (d *decoder) mapAny(m map[string]any) (map[string]any, bool) {
	if d.peek() != '{' {
		return nil, false
	}
	d.i++
	if d.depth++; d.depth > maxCodecDepth {
		return nil, false
	}
	if m == nil {
		m = map[string]any{}
	}
	if d.peek() == '}' {
		d.i++
		d.depth--
		return m, true
	}
	for {
		var key string
		if !d.str(&key) || d.data[d.i-1] != '"' {
			return nil, false // a key is a string, never null
		}
		if d.peek() != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.any()
		if !ok {
			return nil, false
		}
		m[key] = v
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *decoder) sliceAny() (any, bool) {
	d.i++ // '['
	if d.depth++; d.depth > maxCodecDepth {
		return nil, false
	}
	s := []any{}
	if d.peek() == ']' {
		d.i++
		d.depth--
		return s, true
	}
	for {
		v, ok := d.any()
		if !ok {
			return nil, false
		}
		s = append(s, v)
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return s, true
		default:
			return nil, false
		}
	}
}

// mapField reads an object into a map field (null: nil).
func (d *decoder) mapField(m *map[string]any) bool {
	if d.null() {
		*m = nil
		return true
	}
	v, ok := d.mapAny(*m)
	*m = v
	return ok
}

// array reads an array, calling elem with the decoder at each element.
func (d *decoder) array(elem func() bool) bool {
	if d.peek() != '[' {
		return false
	}
	d.i++
	if d.depth++; d.depth > maxCodecDepth {
		return false
	}
	if d.peek() == ']' {
		d.i++
		d.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return true
		default:
			return false
		}
	}
}

// list reads an array into *v (null: nil; [] an empty slice, with room
// for capHint elements), each element by elem into a zero T appended
// first.
func list[T any](d *decoder, v *[]T, capHint int, elem func(*T) bool) bool {
	if d.null() {
		*v = nil
		return true
	}
	*v = make([]T, 0, capHint)
	return d.array(func() bool {
		*v = append(*v, *new(T))
		return elem(&(*v)[len(*v)-1])
	})
}

// strings reads an array of strings (null: nil; [] an empty slice).
func (d *decoder) strings(v *[]string) bool { return list(d, v, 0, d.str) }

func (d *decoder) ints(v *[]int) bool { return list(d, v, 0, d.int) }

func (d *decoder) maps(v *[]map[string]any) bool {
	return list(d, v, 0, func(m *map[string]any) bool {
		if d.null() {
			return true
		}
		var ok bool
		*m, ok = d.mapAny(nil)
		return ok
	})
}

// healthChecks reads an array of health check results (null: nil).
func (d *decoder) healthChecks(v *[]HealthCheck) bool {
	return list(d, v, 0, func(h *HealthCheck) bool { return d.null() || d.healthCheck(h) })
}

// skip reads any value and drops it.
func (d *decoder) skip() bool {
	_, ok := d.any()
	return ok
}

// time reads a time as time.Time.UnmarshalJSON does (null leaves it).
func (d *decoder) time(t *time.Time) bool {
	if d.null() {
		return true
	}
	start := d.i
	if _, _, ok := d.stringRaw(); !ok {
		return false
	}
	return t.UnmarshalJSON(d.data[start:d.i]) == nil
}

var taskFields = []string{
	"v", "run_id", "root_run_id", "task", "attempt", "manifest", "resource", "data", "noop", "health_check_only",
	"refresh", "subscribers", "work_dir", "bundle", "entry", "pool", "timeout_ms", "deadline", "segment",
	"continue_after_failure", "ref", "resumed", "token", "segment_tokens", "assignment", "assume", "batch_outcomes",
}

func (d *decoder) task(t *Task) bool {
	return d.object(taskFields, func(k int) bool {
		switch k {
		case 0:
			return d.int(&t.V)
		case 1:
			return d.str(&t.RunID)
		case 2:
			return d.str(&t.RootRunID)
		case 3:
			return d.int(&t.Task)
		case 4:
			return d.int(&t.Attempt)
		case 5:
			return d.str(&t.Manifest)
		case 6:
			return d.null() || d.resource(&t.Resource)
		case 7:
			return d.mapField(&t.Data)
		case 8:
			return d.bool(&t.Noop)
		case 9:
			return d.bool(&t.HealthCheckOnly)
		case 10:
			return d.bool(&t.Refresh)
		case 11:
			return d.strings(&t.Subscribers)
		case 12:
			return d.str(&t.WorkDir)
		case 13:
			return d.str(&t.Bundle)
		case 14:
			return d.str(&t.Entry)
		case 15:
			return d.str(&t.Pool)
		case 16:
			return d.int64(&t.TimeoutMS)
		case 17:
			return d.time(&t.Deadline)
		case 18:
			// Room made at once for as many items as the message could
			// hold (an item takes 256 bytes or more in a segment).
			return list(d, &t.Segment, min(maxSegmentItems, len(d.data)/256+1), func(it *SegmentItem) bool {
				return d.null() || d.segmentItem(it)
			})
		case 19:
			return d.bool(&t.ContinueAfterFailure)
		case 20:
			return d.str(&t.Ref)
		case 21:
			return d.bool(&t.Resumed)
		case 22:
			return d.str(&t.Token)
		case 23:
			return d.strings(&t.SegmentTokens)
		case 24:
			return d.str(&t.Assignment)
		case 25:
			return d.assume(&t.Assume)
		case 26:
			return d.bool(&t.BatchOutcomes)
		}
		return false
	})
}

var segmentItemFields = []string{
	"task", "attempt", "resource", "refresh", "timeout_ms", "traceparent", "requires", "token", "subscribers", "assume",
}

func (d *decoder) segmentItem(it *SegmentItem) bool {
	return d.object(segmentItemFields, func(k int) bool {
		switch k {
		case 0:
			return d.int(&it.Task)
		case 1:
			return d.int(&it.Attempt)
		case 2:
			return d.null() || d.resource(&it.Resource)
		case 3:
			return d.bool(&it.Refresh)
		case 4:
			return d.int64(&it.TimeoutMS)
		case 5:
			return d.str(&it.Traceparent)
		case 6:
			return d.ints(&it.Requires)
		case 7:
			return d.str(&it.Token)
		case 8:
			return d.strings(&it.Subscribers)
		case 9:
			return d.assume(&it.Assume)
		}
		return false
	})
}

var assumeFields = []string{"directories", "users", "groups", "packages"}

func (d *decoder) assume(p **Assume) bool {
	if d.null() {
		*p = nil
		return true
	}
	a := new(Assume)
	*p = a
	return d.object(assumeFields, func(k int) bool {
		switch k {
		case 0:
			if d.null() {
				a.Directories = nil
				return true
			}
			m := map[string]string{}
			a.Directories = m
			return d.stringMap(m)
		case 1:
			return d.strings(&a.Users)
		case 2:
			return d.strings(&a.Groups)
		case 3:
			return d.strings(&a.Packages)
		}
		return false
	})
}

// stringMap reads an object of strings into m.
func (d *decoder) stringMap(m map[string]string) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		var key, v string
		if !d.str(&key) || d.data[d.i-1] != '"' {
			return false
		}
		if d.peek() != ':' {
			return false
		}
		d.i++
		if d.peek() == 'n' {
			// encoding/json stores the zero value for null
			if !d.lit("null") {
				return false
			}
		} else if !d.str(&v) {
			return false
		}
		m[key] = v
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

var resourceFields = []string{
	"type", "name", "alias", "ensure", "provider", "require", "subscribe", "control", "health_checks",
	"register_when_stable", "target", "timeout", "retry", "autoedge", "auto_require", "auto_skipped",
	"properties", "pos", "path",
}

func (d *decoder) resource(r *schemas.Resource) bool {
	return d.object(resourceFields, func(k int) bool {
		switch k {
		case 0:
			return d.str(&r.Type)
		case 1:
			return d.str(&r.Name)
		case 2:
			return d.str(&r.Alias)
		case 3:
			return d.str(&r.Ensure)
		case 4:
			return d.str(&r.Provider)
		case 5:
			return d.strings(&r.Require)
		case 6:
			return d.strings(&r.Subscribe)
		case 7:
			if d.null() {
				r.Control = nil
				return true
			}
			c := new(schemas.Control)
			r.Control = c
			return d.object(controlFields, func(k int) bool {
				if k == 0 {
					return d.str(&c.If)
				}
				return d.str(&c.Unless)
			})
		case 8:
			return d.maps(&r.HealthChecks)
		case 9:
			return d.maps(&r.RegisterWhenStable)
		case 10:
			return d.str(&r.Target)
		case 11:
			var n int64
			if !d.int64(&n) {
				return false
			}
			if n != 0 {
				r.Timeout = time.Duration(n)
			}
			return true
		case 12:
			return d.int(&r.Retry)
		case 13:
			if d.null() {
				r.AutoEdge = nil
				return true
			}
			b := new(bool)
			r.AutoEdge = b
			return d.bool(b)
		case 14:
			return d.strings(&r.AutoRequire)
		case 15:
			return d.strings(&r.AutoSkipped)
		case 16:
			return d.mapField(&r.Properties)
		case 17:
			if d.null() {
				return true
			}
			p := &r.Pos
			return d.object(positionFields, func(k int) bool {
				switch k {
				case 0:
					return d.str(&p.File)
				case 1:
					return d.int(&p.Line)
				}
				return d.int(&p.Column)
			})
		case 18:
			return d.str(&r.Path)
		}
		return false
	})
}

var (
	controlFields  = []string{"if", "unless"}
	positionFields = []string{"file", "line", "column"}
)

var outcomeFields = []string{
	"v", "run_id", "task", "attempt", "ref", "status", "changed", "refreshed", "message", "diff", "error",
	"duration_ms", "worker", "delivery", "replayed", "health_checks", "kind", "mac", "outcomes",
}

func (d *decoder) outcome(o *Outcome, level int) bool {
	return d.object(outcomeFields, func(k int) bool {
		switch k {
		case 0:
			return d.int(&o.V)
		case 1:
			return d.str(&o.RunID)
		case 2:
			return d.int(&o.Task)
		case 3:
			return d.int(&o.Attempt)
		case 4:
			return d.str(&o.Ref)
		case 5:
			return d.str((*string)(&o.Status))
		case 6:
			return d.bool(&o.Changed)
		case 7:
			return d.bool(&o.Refreshed)
		case 8:
			return d.str(&o.Message)
		case 9:
			return d.str(&o.Diff)
		case 10:
			return d.str(&o.Error)
		case 11:
			return d.int64(&o.DurationMS)
		case 12:
			return d.str(&o.Worker)
		case 13:
			return d.int(&o.Delivery)
		case 14:
			return d.bool(&o.Replayed)
		case 15:
			return d.healthChecks(&o.HealthChecks)
		case 16:
			return d.str((*string)(&o.Kind))
		case 17:
			return d.str(&o.MAC)
		case 18:
			// A batch's outcomes, room made at once for as many as its
			// size could hold (an outcome takes 160 bytes or more).
			room := 0
			if level == 0 {
				room = min(MaxBatchOutcomes, len(d.data)/160+1)
			}
			return list(d, &o.Outcomes, room, func(e *Outcome) bool { return d.null() || d.outcome(e, level+1) })
		}
		return false
	})
}

var healthCheckFields = []string{"name", "status", "output", "tries", "ignored"}

func (d *decoder) healthCheck(h *HealthCheck) bool {
	return d.object(healthCheckFields, func(k int) bool {
		switch k {
		case 0:
			return d.str(&h.Name)
		case 1:
			return d.str(&h.Status)
		case 2:
			return d.str(&h.Output)
		case 3:
			return d.int(&h.Tries)
		case 4:
			return d.bool(&h.Ignored)
		}
		return false
	})
}

// DecodeTask is Decode for a task message: the hand-written decoder
// when it takes the message, Decode (encoding/json) otherwise.
func DecodeTask(data []byte, t *Task) error {
	if t.zero() {
		var fast Task
		if decodeTaskFast(data, &fast) {
			*t = fast
			return checkVersion(t.V)
		}
	}
	return Decode(data, t)
}

// decodeOutcome is Decode for an outcome or outcome batch message, as
// DecodeTask.
func decodeOutcome(data []byte, o *Outcome) error {
	if o.zero() {
		var fast Outcome
		if decodeOutcomeFast(data, &fast) {
			*o = fast
			return checkVersion(o.V)
		}
	}
	return Decode(data, o)
}

// checkVersion is Decode's check of a decoded message's version.
func checkVersion(v int) error {
	if v != 0 && v != Version {
		return fmt.Errorf("%w: %d (this build speaks %d)", ErrVersion, v, Version)
	}
	return nil
}

// zero reports whether t is the zero Task (the fast decoder fills a
// fresh value; encoding/json would merge into a used one).
func (t *Task) zero() bool { return reflect.ValueOf(t).Elem().IsZero() }

func (o *Outcome) zero() bool { return reflect.ValueOf(o).Elem().IsZero() }

// JSONReader reads a JSON document for a hand-written decoder of another
// package's message (the run report), with the rules of the decoders
// above: each method reports false when encoding/json must decide (the
// caller then decodes the whole document with it), and Object skips
// unknown keys and refuses case-folded or repeated ones.
type JSONReader struct{ d decoder }

// NewJSONReader returns a reader of data.
func NewJSONReader(data []byte) *JSONReader { return &JSONReader{d: decoder{data: data}} }

// Object reads an object whose known keys are names (at most 64),
// calling field with each one's index, the reader at its value.
func (r *JSONReader) Object(names []string, field func(k int) bool) bool {
	return len(names) <= 64 && r.d.object(names, field)
}

// Array reads an array, calling elem at each element.
func (r *JSONReader) Array(elem func() bool) bool { return r.d.array(elem) }

// Null consumes a null if one is next.
func (r *JSONReader) Null() bool { return r.d.null() }

// String reads a string (null leaves *s).
func (r *JSONReader) String(s *string) bool { return r.d.str(s) }

// Int reads an integer (null leaves *v).
func (r *JSONReader) Int(v *int) bool { return r.d.int(v) }

// Int64 reads an integer (null leaves *v).
func (r *JSONReader) Int64(v *int64) bool { return r.d.int64(v) }

// Uint64 reads a non-negative integer (null leaves *v).
func (r *JSONReader) Uint64(v *uint64) bool {
	if r.d.null() {
		return true
	}
	s, ok := r.d.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		return false
	}
	*v = n
	return true
}

// Bool reads true or false (null leaves *v).
func (r *JSONReader) Bool(v *bool) bool { return r.d.bool(v) }

// Time reads a time as time.Time.UnmarshalJSON does (null leaves *t).
func (r *JSONReader) Time(t *time.Time) bool { return r.d.time(t) }

// Strings reads an array of strings (null: nil).
func (r *JSONReader) Strings(v *[]string) bool { return r.d.strings(v) }

// HealthChecks reads an array of health check results (null: nil).
func (r *JSONReader) HealthChecks(v *[]HealthCheck) bool { return r.d.healthChecks(v) }

// Offset is how many bytes of the document were read; Len its length.
func (r *JSONReader) Offset() int { return r.d.i }

// Len is the document's length in bytes.
func (r *JSONReader) Len() int { return len(r.d.data) }

// End reports whether only white space is left.
func (r *JSONReader) End() bool {
	r.d.ws()
	return r.d.i == len(r.d.data)
}

// AppendJSONString appends s as json.Marshal encodes a string.
func AppendJSONString(buf []byte, s string) []byte { return appendString(buf, s) }

// AppendHealthChecks appends hcs as json.Marshal encodes them.
func AppendHealthChecks(buf []byte, hcs []HealthCheck) []byte {
	buf = append(buf, '[')
	for i := range hcs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendHealthCheck(buf, &hcs[i])
	}
	return append(buf, ']')
}
