package cli

import (
	"fmt"
	"strings"
)

// printMessage prints a manifest's pre_message or post_message on stdout
// in text output, ending it with a newline; json output carries them in
// the report only.
func printMessage(st IO, output, msg string) {
	if msg == "" || output == "json" {
		return
	}
	fmt.Fprint(st.Stdout, msg)
	if !strings.HasSuffix(msg, "\n") {
		fmt.Fprintln(st.Stdout)
	}
}
