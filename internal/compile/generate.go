package compile

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// expandJetFile renders m's resources_jet_file over scope (the resolved
// data, the facts, the manifest's directory) and parses the YAML it
// renders as m's resources, with m's manifest-level defaults. Errors name
// the template; those in the generated resources name its rendered lines
// ("resources.jet (rendered):3: ...").
func expandJetFile(m *schemas.Manifest, scope template.Scope) error {
	at := &schemas.Error{Pos: schemas.Position{File: m.Path}, Path: "resources_jet_file"}
	if scope.Dir == "" && scope.Files == nil {
		at.Message, at.Err = fmt.Sprintf("%q: %v: the manifest's directory is not available (an inline manifest?)", m.ResourcesJetFile, ErrNoManifestDir), ErrNoManifestDir
		return schemas.Errors{at}
	}
	out, err := template.RenderJetFile(m.ResourcesJetFile, scope)
	if err != nil {
		at.Message, at.Err = err.Error(), err
		return schemas.Errors{at}
	}
	name := filepath.Join(filepath.Dir(m.Path), filepath.FromSlash(m.ResourcesJetFile)) + " (rendered)"
	rs, err := schemas.ParseResources(m, name, []byte(out))
	if err != nil {
		var errs schemas.Errors
		if errors.As(err, &errs) {
			return errs
		}
		at.Message = err.Error()
		return schemas.Errors{at}
	}
	m.Resources = rs
	return nil
}

// messages renders m's pre_message and post_message over scope; a
// template that fails is an error naming the key.
func messages(m *schemas.Manifest, scope template.Scope) (pre, post string, err error) {
	var errs schemas.Errors
	render := func(key, s string) string {
		if err := template.Check(s); err != nil {
			errs = append(errs, &schemas.Error{Pos: schemas.Position{File: m.Path}, Path: key, Message: err.Error(), Err: err})
			return ""
		}
		v, err := template.Render(s, scope)
		if err != nil && needsWorker(err) {
			return s // a fact this host does not have: shown as written
		}
		if err != nil {
			errs = append(errs, &schemas.Error{Pos: schemas.Position{File: m.Path}, Path: key, Message: err.Error(), Err: err})
			return ""
		}
		return fmt.Sprint(v)
	}
	pre, post = render("pre_message", m.PreMessage), render("post_message", m.PostMessage)
	if len(errs) > 0 {
		return "", "", errs
	}
	return pre, post, nil
}
