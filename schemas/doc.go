// Package schemas holds manifold's CUE schemas, loads manifests from YAML,
// JSON or CUE, validates them against the schemas with file:line:col errors
// and normalises CCM's block shape and the flat shape into one typed model.
//
// The schemas (Files) are closed CUE definitions: #Common for the properties
// every resource has, and one definition per resource type registered in
// #types (Types). Each resource is unified with its own type's definition,
// picked in Go by its type, so errors name the exact field. Adding a type is
// dropping in a .cue file that declares its definition and registers it in
// #types.
//
// Parse and Load return Errors, every problem found at once, each an *Error
// with the input position and the field path:
//
//	site.yaml:6:11: resources[1].file[0]./tmp/x.contnet: field not allowed (did you mean "content"?)
//
// Template expressions ({{ ... }} and ${ ... }) are kept as written. Names,
// aliases and references are rendered by the coordinator, which then calls
// CheckReferences; Parse calls it itself when there is nothing to render.
package schemas
