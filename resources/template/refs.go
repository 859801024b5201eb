package template

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// fileCall matches a file-reading call with a literal argument:
// file('x'), readFile("x"), template(`x`), jet('x', ...).
var fileCall = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("\\b(file|readFile|template|jet)\\(\\s*(?:'([^'\\\\]*)'|\"([^\"\\\\]*)\"|`([^`]*)`)")
})

// FileRefs lists the files text names in literal arguments of file(),
// readFile(), template() (a path ending in .templ or .jet) and jet() (a
// path ending in .jet), in order of appearance, without duplicates. It
// reads expressions and Jet templates alike, so the files a property will
// read on a worker can be shipped with the manifest even when the
// property can only be rendered there. Arguments computed at run time
// (file(lookup('data.f'))) are not seen.
func FileRefs(text string) []string {
	if !strings.Contains(text, "(") {
		return nil
	}
	var out []string
	for _, m := range fileCall().FindAllStringSubmatch(text, -1) {
		arg := m[2] + m[3] + m[4]
		switch m[1] {
		case "template":
			if ext := filepath.Ext(arg); ext != ".templ" && ext != ".jet" {
				continue // inline template text
			}
		case "jet":
			if !strings.HasSuffix(arg, ".jet") {
				continue
			}
		}
		if arg != "" && !slices.Contains(out, arg) {
			out = append(out, arg)
		}
	}
	return out
}
