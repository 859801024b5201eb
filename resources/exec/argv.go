package exec

import "strings"

// SplitCommand splits a command line into argv with the POSIX shell's
// quoting rules and nothing else: words are separated by unquoted blanks
// (space, tab, newline); single quotes keep everything literal; inside double
// quotes a backslash escapes only $ ` " \ and newline; outside quotes a
// backslash escapes any character and a backslash-newline joins lines. A
// pair of empty quotes, single or double, makes an empty argument.
// Variables, globs, pipes and redirections are not interpreted: "$HOME" and
// "|" stay as they are.
func SplitCommand(line string) ([]string, error) {
	var (
		args   []string
		word   strings.Builder
		inWord bool // a word started, even if empty ('' is a word)
	)
	const (
		plain = iota
		single
		double
	)
	state := plain
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch state {
		case single:
			if c == '\'' {
				state = plain
			} else {
				word.WriteByte(c)
			}
		case double:
			switch c {
			case '"':
				state = plain
			case '\\':
				if i+1 < len(line) && strings.IndexByte("$`\"\\\n", line[i+1]) >= 0 {
					i++
					if line[i] != '\n' {
						word.WriteByte(line[i])
					}
				} else {
					word.WriteByte(c)
				}
			default:
				word.WriteByte(c)
			}
		default:
			switch c {
			case ' ', '\t', '\n':
				if inWord {
					args = append(args, word.String())
					word.Reset()
					inWord = false
				}
			case '\'':
				state, inWord = single, true
			case '"':
				state, inWord = double, true
			case '\\':
				if i+1 >= len(line) {
					return nil, ErrTrailingBackslash
				}
				i++
				if line[i] != '\n' {
					word.WriteByte(line[i])
					inWord = true
				}
			default:
				word.WriteByte(c)
				inWord = true
			}
		}
	}
	if state != plain {
		return nil, ErrUnbalancedQuote
	}
	if inWord {
		args = append(args, word.String())
	}
	return args, nil
}
