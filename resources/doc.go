// Package resources holds manifold's resource contract (Resource, Env,
// Result), the engine that drives it (Execute), the type registry that turns
// a rendered Spec into a Resource, and the property decoding shared by every
// type.
//
// A worker executes one task like this:
//
//	spec, err := resources.RenderSpec(task.Resource, scope) // templates → values
//	res, err := registry.New(spec)                          // decode + Validate
//	outcome := resources.Execute(ctx, res, env)             // check → apply → re-check
//
// Consecutive resources of a type that implements Batcher (packages) can
// instead go through a Batch: each checked, those that must change applied
// by one operation, each re-checked and given its own Outcome.
//
// Types live in sub-packages (resources/file, resources/exec, ...), and
// resources/builtin assembles the registry of the types manifold ships.
// Noop is handled by Execute alone: a type only honours the apply argument
// of CheckApply.
package resources
