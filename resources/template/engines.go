package template

import (
	texttemplate "text/template"

	"github.com/CloudyKit/jet/v6"
)

// Variables returns what templates see as variables: Data, Facts and
// Environ and their lowercase spellings (never nil maps). It is the dot of
// a text/template rendered over the scope.
func (s Scope) Variables() map[string]any {
	env := s.env()
	out := make(map[string]any, 6)
	for _, k := range []string{"Data", "data", "Facts", "facts", "Environ", "environ"} {
		out[k] = env[k]
	}
	return out
}

// JetVariables returns Variables as Jet variables.
func (s Scope) JetVariables() jet.VarMap { return s.jetVariables() }

// JetFunctions returns the functions a Jet template over the scope may
// call: lookup, file, readFile and template.
func (s Scope) JetFunctions() map[string]jet.Func { return s.jetFunctions() }

// GoFunctions returns the functions a text/template over the scope may
// call: lookup, file, readFile, template and jet.
func (s Scope) GoFunctions() texttemplate.FuncMap { return texttemplate.FuncMap(s.functions()) }
