// Package converge keeps hosts converged: it turns the system's events,
// intervals and health results into repair runs (see DESIGN.md, "Keeping
// hosts converged").
//
// The pieces, each usable alone:
//   - PathWatcher: one inotify instance (fsnotify) for every watched
//     resource of a host. Types say what to watch (resources.Watcher); the
//     watcher watches their directories, filters the names and hints the
//     resources whose paths changed. An overflow of the kernel's queue
//     hints everything; a watch that cannot be added (the inotify limit)
//     is reported so the caller falls back to interval checks.
//   - Coalesce: hints become batches — each resource once per batch, a
//     batch at most every window — so a storm of edits gives a bounded
//     number of repairs.
//   - Damper: a resource repaired again and again within a window (another
//     writer fighting manifold) is backed off exponentially and reported as
//     flapping; it keeps being repaired at the backed-off pace.
package converge
