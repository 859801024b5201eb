// Package worker executes resource tasks: it pulls tasks of its pools from
// the bus with bounded concurrency, renders and builds each resource
// through the registry, runs the check/apply engine, records the outcome,
// publishes it and only then acks the task. It registers itself in the
// workers bucket with a heartbeat. It never plans a graph.
package worker
