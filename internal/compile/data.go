package compile

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/manifold-run/manifold/internal/hiera"
	"github.com/manifold-run/manifold/schemas"
)

// Data resolves a manifest's data for one host, from weakest to strongest:
//
//  1. the manifest's `data`, with the `overrides` sections its hierarchy
//     selects for o.Facts (hiera.Resolve: merge first or deep, templates
//     in data and overrides rendered over the facts);
//  2. the apply resource's data (o.ApplyData);
//  3. the run's data (o.Run).
//
// Steps 2 and 3 merge maps key by key at every depth and replace anything
// else, lists included (MergeData). Then the annotations of the data keys
// in o.Source are checked against the result. Errors are schemas.Errors
// naming the manifest and, where known, the line.
func Data(m *schemas.Manifest, o Opts) (map[string]any, error) {
	data, err := hiera.Resolve(m.Data, m.Hierarchy, m.Overrides, o.Facts, nil)
	if err != nil {
		e := &schemas.Error{Pos: schemas.Position{File: m.Path}, Message: err.Error()}
		var entry *hiera.EntryError
		if errors.As(err, &entry) {
			e.Path, e.Message = "hierarchy.order["+strconv.Itoa(entry.Index)+"]", entry.Err.Error()
		}
		return nil, schemas.Errors{e}
	}
	data = MergeData(MergeData(data, o.ApplyData), o.Run)
	if err := checkAnnotations(m.Path, o.Source, data); err != nil {
		return nil, err
	}
	return data, nil
}

// MergeData returns a deep copy of base with over merged into it: maps
// merge key by key at every depth, any other value in over (a list
// included) replaces base's. Neither input is modified.
func MergeData(base, over map[string]any) map[string]any {
	return hiera.Override(base, over)
}

// checkAnnotations checks the @require and @validate annotations of a YAML
// manifest's data keys against its resolved data.
func checkAnnotations(file string, src []byte, data map[string]any) error {
	if !annotated(file, src) {
		return nil
	}
	anns, err := hiera.Annotations(src)
	if err != nil {
		return nil // not YAML after all: the parser accepted it, nothing to read
	}
	err = hiera.Check(data, anns)
	if err == nil {
		return nil
	}
	var errs schemas.Errors
	for _, e := range unjoin(err) {
		var ae *hiera.AnnotationError
		if errors.As(e, &ae) {
			errs = append(errs, &schemas.Error{Pos: schemas.Position{File: file, Line: ae.Line}, Path: "data." + ae.Key,
				Message: ae.Rule + ": " + ae.Message, Err: hiera.ErrAnnotation})
			continue
		}
		errs = append(errs, &schemas.Error{Pos: schemas.Position{File: file}, Message: e.Error()})
	}
	return errs
}

// unjoin returns the errors of an errors.Join, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// annotated reports whether src may hold data annotations: YAML (CUE and
// JSON have no comments to read them from) with a directive in it. It
// spares the second YAML parse of manifests without any.
func annotated(file string, src []byte) bool {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".json", ".cue":
		return false
	}
	return bytes.Contains(src, []byte("@require")) || bytes.Contains(src, []byte("@validate"))
}
