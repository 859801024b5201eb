// Package compile turns a manifest into a plan, the one way every caller
// does it (validate, render, apply, run, the API and the coordinator):
//
//		parse → data → render → check → graph
//
//	  - parse: schemas.ParseUnchecked (cached per process by file name and
//	    content, so a manifest is parsed once however many callers ask);
//	  - data: the manifest's data, its hierarchy's overrides for the host's
//	    facts (internal/hiera), the apply resource's data, the run's data;
//	    maps always merge deep; then the data annotations (@require,
//	    @validate) are checked;
//	  - render: names, aliases and references, from data;
//	  - check: template syntax everywhere (no facts needed), references, and
//	    the properties of every type, apply included, decoded as they will be
//	    when they run;
//	  - graph: requires, subscribes and declaration order.
//
// Tree does it for a manifest and, recursively, the child manifests its
// apply resources name, collecting them into the bundle a run ships.
// Every problem is a schemas.Error naming file, line and field, and all of
// them are reported at once where they are independent.
package compile
