package exec

import (
	"errors"
	"slices"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want []string
		err  error
	}{
		{line: "", want: nil},
		{line: "   \t\n ", want: nil},
		{line: "/bin/true", want: []string{"/bin/true"}},
		{line: "  echo   a\tb\nc  ", want: []string{"echo", "a", "b", "c"}},
		{line: `echo 'a b' "c d"`, want: []string{"echo", "a b", "c d"}},
		{line: `echo 'it''s'`, want: []string{"echo", "its"}},
		{line: `echo "it's"`, want: []string{"echo", "it's"}},
		{line: `echo 'say "hi"'`, want: []string{"echo", `say "hi"`}},
		{line: `echo a'b'"c"d`, want: []string{"echo", "abcd"}},
		{line: `echo '' ""`, want: []string{"echo", "", ""}},
		{line: `echo a\ b`, want: []string{"echo", "a b"}},
		{line: `echo \'x\'`, want: []string{"echo", "'x'"}},
		{line: `echo \\`, want: []string{"echo", `\`}},
		{line: "echo a\\\nb", want: []string{"echo", "ab"}},
		{line: `echo "a\"b" "\$x" "\\" "\n"`, want: []string{"echo", `a"b`, "$x", `\`, `\n`}},
		{line: `echo '\n' '\'`, want: []string{"echo", `\n`, `\`}},
		{line: `echo $HOME | grep x > out; *`, want: []string{"echo", "$HOME", "|", "grep", "x", ">", "out;", "*"}},
		{line: `echo 'unclosed`, err: ErrUnbalancedQuote},
		{line: `echo "unclosed`, err: ErrUnbalancedQuote},
		{line: `echo "a\"`, err: ErrUnbalancedQuote},
		{line: `echo a\`, err: ErrTrailingBackslash},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, err := SplitCommand(tt.line)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
