// Package document is the "document" resource type: a JSON or YAML
// document, in a file or a NATS KV entry, of which manifold owns only the
// fields it declares. Each run merges the desired content three ways with
// the document it finds and the content it applied last time (package
// merge): fields others wrote are kept, fields manifold applied before and
// no longer declares are removed.
//
// The last-applied content is kept per host and resource in Env.State or,
// when that is nil, in a FileStore under the state directory. When it is
// lost, the next run behaves like a first apply: nothing is deleted.
//
// Providers: "file" for absolute paths, "kv" for names kv://bucket/key
// (compare-and-swap on the entry's revision, retried MaxCASAttempts times).
package document
