package coordinator

import "github.com/manifold-run/manifold/resources/template"

// WhereHolds reports whether where, an expr-lang expression over facts
// (bare or in template braces), is true on facts: the evaluation run
// --where, assign --where and `manifold fleet --where` share. An
// expression that gives no bool is an error.
func WhereHolds(where string, facts map[string]any) (bool, error) { return whereHolds(where, facts) }

// CheckWhere checks a where expression without facts: its markers pair
// up and it compiles (syntax, known functions and variables). The error
// is a *template.SyntaxError or a *template.ExprError.
func CheckWhere(where string) error {
	if !template.HasTemplate(where) {
		where = "{{ " + where + " }}"
	}
	return template.Check(where)
}
