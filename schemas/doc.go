// Package schemas holds manifold's CUE schemas, loads manifests from YAML,
// JSON or CUE, validates them against the schemas with file:line:col errors
// and normalises CCM's block shape and the flat shape into one typed model.
package schemas
