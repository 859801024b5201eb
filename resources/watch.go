package resources

// Watcher is implemented by types whose drift the system can announce
// (mgmt's Watch). A type says what to watch; it never watches by itself and
// never applies: the converge package holds one inotify instance for every
// resource of a host (and one poll of systemd's units, one KV watch per
// entry), turns the system's events into hints ("this resource may have
// drifted") and runs a check/apply of the hinted resources. A type that
// does not implement Watcher is covered by the interval check.
type Watcher interface {
	// WatchTargets lists what to watch: paths, systemd units or KV
	// entries whose changes are hints that the resource may have drifted.
	// It never touches the system.
	WatchTargets() []WatchTarget
}

// WatchTarget is one thing a resource is watched through: a path, a
// systemd unit or a KV entry (exactly one of Path, Unit and Bucket is
// set).
type WatchTarget struct {
	// Path is an absolute path. Any change at it (written, created,
	// removed, renamed over, chmod or chown, a link planted in its place)
	// is a hint. Its directory is watched, so the path need not exist.
	Path string
	// Tree makes every change below Path a hint too (a scaffold's target,
	// an archive's extraction).
	Tree bool
	// Unit is a systemd unit (a service) whose state changes (active,
	// sub-state, enablement, load state) are hints.
	Unit string
	// Bucket and Key name a NATS KV entry (a kv:// document) whose
	// changes (put, delete, purge) are hints.
	Bucket, Key string
}
