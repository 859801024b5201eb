package pkg

import "github.com/manifold-run/manifold/resources"

var _ resources.Watcher = (*Package)(nil)

// The package databases: every install, upgrade or removal rewrites one.
const (
	// DpkgStatus is dpkg's database (apt), rewritten by rename.
	DpkgStatus = "/var/lib/dpkg/status"
	// RPMDB is rpm's database directory (dnf).
	RPMDB = "/var/lib/rpm"
)

// WatchTargets is the package database of the resource's provider (both
// when none is forced: which one manages the host is known only when the
// resource runs). A change there is a hint for every package resource;
// each checks its own package.
func (p *Package) WatchTargets() []resources.WatchTarget {
	switch p.provider {
	case "apt":
		return []resources.WatchTarget{{Path: DpkgStatus}}
	case "dnf":
		return []resources.WatchTarget{{Path: RPMDB, Tree: true}}
	default:
		return []resources.WatchTarget{{Path: DpkgStatus}, {Path: RPMDB, Tree: true}}
	}
}
