// Package coordinator turns run requests into resource tasks on the bus: it
// validates and plans a manifest's graph, dispatches ready tasks, consumes
// their outcomes, applies require, subscribe and fail_on_error, records
// run state in the runs bucket, publishes progress events and builds the
// run report. It never executes a resource itself.
package coordinator
