package hiera

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"

	"github.com/manifold-run/manifold/schemas"
)

// Document is a hiera file as CCM's --hiera reads it: data, the hierarchy
// that picks override sections by facts, and the overrides. It has the
// same meaning as those keys of a manifest.
type Document struct {
	// Data is the base data.
	Data map[string]any `yaml:"data"`
	// Hierarchy orders the override sections; empty means ["default"].
	Hierarchy schemas.Hierarchy `yaml:"hierarchy"`
	// Overrides are the sections by rendered hierarchy entry.
	Overrides map[string]map[string]any `yaml:"overrides"`
}

// hierarchyYAML is schemas.Hierarchy's YAML form.
type hierarchyYAML struct {
	Order []string      `yaml:"order"`
	Merge schemas.Merge `yaml:"merge"`
}

// document is Document's YAML form (its name is in decoding errors).
type document struct {
	Data      map[string]any            `yaml:"data"`
	Hierarchy hierarchyYAML             `yaml:"hierarchy"`
	Overrides map[string]map[string]any `yaml:"overrides"`
}

// ParseDocument reads a hiera document (YAML or JSON) named name (for
// errors). Keys other than data, hierarchy and overrides are an error
// naming the line: a file of plain data belongs to --data-file.
func ParseDocument(name string, src []byte) (*Document, error) {
	var raw document
	dec := yaml.NewDecoder(bytes.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: %v (a hiera file holds data, hierarchy and overrides; plain data goes in --data-file)", ErrDocument, name, err)
	}
	d := &Document{Data: raw.Data, Hierarchy: schemas.Hierarchy{Order: raw.Hierarchy.Order, Merge: raw.Hierarchy.Merge}, Overrides: raw.Overrides}
	if d.Data == nil && d.Overrides == nil {
		return nil, fmt.Errorf("%w: %s has neither data nor overrides", ErrDocument, name)
	}
	return d, nil
}

// Resolve returns the document's data for a host with these facts (see
// Resolve).
func (d *Document) Resolve(facts map[string]any) (map[string]any, error) {
	return Resolve(normalizeMap(d.Data), d.Hierarchy, d.Overrides, facts, nil)
}

// normalizeMap makes YAML's map[string]any trees plain (yaml.v3 decodes
// nested maps as map[string]any already; nil becomes empty).
func normalizeMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
