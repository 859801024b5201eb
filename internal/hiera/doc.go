// Package hiera resolves a manifest's data for one host, as CCM's
// hierarchical data resolver does: the manifest's `data:` is the base, the
// `overrides:` sections whose keys match the rendered `hierarchy.order`
// entries are merged over it, and the run's data (--data, --data-file) is
// merged last and always wins. Data annotations (`# @require`,
// `# @validate <expr>` comments on data keys) are read from the YAML source
// and checked against the result.
//
// Everything here is pure: no I/O beyond the bytes and maps given.
package hiera
