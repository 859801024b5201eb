package compile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// checkFiles checks the syntax of the template files m's resources name in
// literal arguments (template('app.templ'), jet('app.jet'), in properties
// and health checks), and of the templates of its scaffold resources, when
// the manifest's files are at hand (scope's Dir or Files): a syntax error
// in the third resource's template fails before the first resource runs.
// A file that does not exist is left to the run.
//
// files are the indexes of the resources whose templates may name a file
// (checkSyntax), in order.
func checkFiles(m *schemas.Manifest, files []int, scope template.Scope) schemas.Errors {
	var errs schemas.Errors
	for i := range m.Resources {
		r := &m.Resources[i]
		add := func(field string, err error) {
			if err != nil {
				errs = append(errs, &schemas.Error{Pos: r.Pos, Path: r.Path + "." + field, Message: fmt.Sprintf("%s: %v", r.Ref(), err), Err: err})
			}
		}
		if r.Type == "scaffold" {
			add("source", checkScaffold(r, scope))
		}
		if len(files) > 0 && files[0] < i {
			files = files[1:]
		}
		if scope.Dir == "" && scope.Files == nil || len(files) == 0 || files[0] != i {
			continue
		}
		check := func(field string, v any) {
			for _, s := range stringsIn(v) {
				for _, ref := range fileRefs(s) {
					if err := template.CheckFile(ref, scope.ReadFile); err != nil {
						add(field, err)
						return
					}
				}
			}
		}
		for _, k := range sortedKeys(r.Properties) {
			check(k, r.Properties[k])
		}
		for j, hc := range r.HealthChecks {
			check("health_checks["+strconv.Itoa(j)+"]", hc)
		}
	}
	return errs
}

// namesFiles reports whether a property or health check of r may name a
// file (fileRefs): the walk in key order, which allocates, is taken only
// then (nearly never: it was 6 % of the validate of 20,000 files).
func namesFiles(r *schemas.Resource) bool {
	for _, v := range r.Properties {
		if mayNameFiles(v) {
			return true
		}
	}
	for _, hc := range r.HealthChecks {
		if mayNameFiles(hc) {
			return true
		}
	}
	return false
}

// mayNameFiles reports whether a string inside v (stringsIn's walk) is a
// template that fileRefs may find a file in.
func mayNameFiles(v any) bool {
	switch v := v.(type) {
	case string:
		return template.HasTemplate(v) && mayReferFiles(v)
	case map[string]any:
		for _, e := range v {
			if mayNameFiles(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if mayNameFiles(e) {
				return true
			}
		}
	}
	return false
}

// mayReferFiles reports whether text names one of file(, readFile(,
// template( and jet(: without, template.FileRefs finds nothing.
func mayReferFiles(text string) bool {
	return strings.Contains(text, "ile(") || strings.Contains(text, "template(") || strings.Contains(text, "jet(")
}

// fileRefs is template.FileRefs without its regular expression for the
// texts that name none of file(, readFile(, template( and jet( (nearly
// all: the expression was a tenth of the compile of 20,000 files).
func fileRefs(text string) []string {
	if !mayReferFiles(text) {
		return nil
	}
	return template.FileRefs(text)
}
