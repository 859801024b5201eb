package exec

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Placeholder is the word a command line holds where a value (a file's
// path, for scaffold's post commands) goes.
const Placeholder = "{}"

// shells are the programs whose -c argument is a script: a value put
// there would be parsed as shell code.
var shells = []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh"}

// PlaceArgument puts value where argv holds "{}", or appends it as the last
// argument when no argument does. An argument is never parsed by a shell,
// so the replacement is literal (a file named "a; rm -rf /" stays one
// argument) — except in the script of a shell's -c ("sh -c 'chmod +x
// {}'"), where the value would become code: there "{}" is replaced by a
// quoted reference to a positional parameter ("${1}") and value is passed
// as that parameter, after the script's own ones ($0 defaults to the
// shell's name). "{}" may be written bare, in single or in double quotes in
// the script; each form is rewritten to keep value one word.
func PlaceArgument(argv []string, value string) []string {
	if i := shellScript(argv); i > 0 && strings.Contains(argv[i], Placeholder) {
		out := slices.Clone(argv)
		rest := len(argv) - i - 1 // the script's $0, $1, ...
		if rest == 0 {
			out = append(out, filepath.Base(argv[0]))
			rest = 1
		}
		out[i] = quoteParam(argv[i], rest)
		return append(out, value)
	}
	out := make([]string, 0, len(argv)+1)
	placed := false
	for _, a := range argv {
		if strings.Contains(a, Placeholder) {
			a = strings.ReplaceAll(a, Placeholder, value)
			placed = true
		}
		out = append(out, a)
	}
	if !placed {
		out = append(out, value)
	}
	return out
}

// shellScript returns the index of the script in argv when argv runs a
// shell with -c (options such as -e, -x, -o NAME may come before), else 0.
func shellScript(argv []string) int {
	if len(argv) < 3 || !slices.Contains(shells, filepath.Base(argv[0])) {
		return 0
	}
	command := false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--":
			if command && i+1 < len(argv) {
				return i + 1
			}
			return 0
		case a == "-o" || a == "+o" || a == "-O" || a == "+O":
			i++ // takes an argument
		case len(a) > 1 && (a[0] == '-' || a[0] == '+') && !strings.HasPrefix(a, "--"):
			if a[0] == '-' && strings.ContainsRune(a[1:], 'c') {
				command = true
			}
		case strings.HasPrefix(a, "--"):
			// a long option (--norc, --login): no argument
		default:
			if command {
				return i
			}
			return 0
		}
	}
	return 0
}

// quoteParam rewrites every "{}" of a shell script into a reference to
// positional parameter n that expands to exactly one word, whatever the
// quoting around it: "${n}" outside quotes, ${n} inside double quotes,
// '"${n}"' inside single quotes (closing and reopening them). '{}' and
// "{}" become "${n}".
func quoteParam(script string, n int) string {
	ref := "${" + strconv.Itoa(n) + "}"
	var b strings.Builder
	const (
		plain = iota
		single
		double
	)
	state := plain
	for i := 0; i < len(script); i++ {
		c := script[i]
		if strings.HasPrefix(script[i:], Placeholder) {
			switch state {
			case plain:
				b.WriteString(`"` + ref + `"`)
			case double:
				b.WriteString(ref)
			case single:
				b.WriteString(`'"` + ref + `"'`)
			}
			i += len(Placeholder) - 1
			continue
		}
		b.WriteByte(c)
		switch {
		case state == plain && c == '\\' && i+1 < len(script):
			i++
			b.WriteByte(script[i])
		case state == double && c == '\\' && i+1 < len(script):
			i++
			b.WriteByte(script[i])
		case state == plain && c == '\'':
			state = single
		case state == plain && c == '"':
			state = double
		case state == single && c == '\'':
			state = plain
		case state == double && c == '"':
			state = plain
		}
	}
	return b.String()
}
