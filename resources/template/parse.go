package template

import (
	"errors"
	"strings"
)

// part is literal text or an expression (without its markers, trimmed).
type part struct {
	text string
	expr bool
}

// parse splits s into literal text and expressions. Inside an expression,
// quoted strings and balanced braces (map literals) are skipped when looking
// for the closer, so `{{ {"a": "}}"} }}` is one expression.
func parse(s string) ([]part, error) { return parseInto(nil, s) }

// maxStackParts is how many parts the renderers keep on their stack
// before parseInto's append moves them to the heap.
const maxStackParts = 8

// parseInto is parse appending to dst: given a buffer on the caller's
// stack it allocates nothing for a text of up to maxStackParts parts.
// Every part's text is a substring of s, never a copy: literal text runs
// are sliced out whole, and an escaped opener (\{{, \${) ends one literal
// part and starts the next at the opener (the backslash dropped), so
// concatenating the parts gives the text the escapes stand for.
func parseInto(dst []part, s string) ([]part, error) {
	parts := dst
	lit := 0 // start of the literal run not yet in parts
	flush := func(end int) {
		if end > lit {
			parts = append(parts, part{text: s[lit:end]})
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' && c != '{' && c != '$' {
			i++
			continue
		}
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, `\{{`), strings.HasPrefix(rest, `\${`):
			flush(i)
			lit = i + 1
			i += 3
		case strings.HasPrefix(rest, "{{"), strings.HasPrefix(rest, "${"):
			opener := rest[:2]
			double := opener == "{{"
			end := findClose(s, i+2, double)
			if end < 0 {
				return nil, &SyntaxError{Template: s, Offset: i, Opener: opener}
			}
			inner := strings.TrimSpace(s[i+2 : end])
			if inner == "" {
				return nil, &ExprError{Expr: inner, Err: errors.New("empty expression")}
			}
			flush(i)
			parts = append(parts, part{text: inner, expr: true})
			i = end + 1
			if double {
				i++
			}
			lit = i
		default:
			i++
		}
	}
	flush(len(s))
	return parts, nil
}

// findClose returns the index of the closer ("}}" when double, else "}")
// of an expression starting at start, or -1.
func findClose(s string, start int, double bool) int {
	depth := 0
	for j := start; j < len(s); j++ {
		switch c := s[j]; c {
		case '\'', '"', '`':
			j = skipQuoted(s, j)
			if j < 0 {
				return -1
			}
		case '{':
			depth++
		case '}':
			switch {
			case depth > 0:
				depth--
			case !double:
				return j
			case j+1 < len(s) && s[j+1] == '}':
				return j
			}
		}
	}
	return -1
}

// skipQuoted returns the index of the quote closing the string that opens at
// s[open], or -1. Backslash escapes apply in '...' and "..." strings.
func skipQuoted(s string, open int) int {
	q := s[open]
	for j := open + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j
		}
	}
	return -1
}
