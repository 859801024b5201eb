// Package merge is a three-way merge of structured documents (JSON-like
// values: maps, lists and scalars), after Metacontroller's dynamic apply and
// kubectl's client-side apply: it applies the changes between what manifold
// applied last and what it wants now to what it observes, keeping every
// field it never declared.
//
// The rules, for Merge(lastApplied, observed, desired):
//
//   - observed absent ⇒ the result is desired;
//   - maps merge key by key: a key of lastApplied that desired no longer has
//     is deleted, keys only observed has (written by others) are kept, and
//     with no lastApplied nothing is deleted;
//   - null in desired deletes the field (kubectl; Metacontroller would store
//     the null);
//   - a type change (map, list, scalar) takes the desired value
//     (kubectl; Metacontroller fails);
//   - a list is associative when every item of observed, lastApplied and
//     desired is a map and they all share one conventional key, picked in
//     the order containerPort, port, mountPath, name, uid, ip, path; items
//     match by that key, items we applied and no longer want are removed,
//     others' items stay; surviving observed items keep their order and new
//     desired items are appended in desired order;
//   - any other list is atomic: replaced by desired.
//
// Options go beyond the convention, by dotted path (a list level adds no
// segment: "spec.containers.ports"): MergeKeys names explicit, possibly
// multi-field keys of a list; Atomic replaces a list or map whole; Sets
// merges a list of scalars as a set.
package merge
