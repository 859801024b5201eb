package service

import "github.com/manifold-run/manifold/resources"

var _ resources.Watcher = (*Service)(nil)

// WatchTargets is the service's systemd unit: a change of its state
// (stopped by hand, failed, disabled, masked, unit file edited) is a hint
// (converge.UnitWatcher polls systemctl for it).
func (s *Service) WatchTargets() []resources.WatchTarget {
	return []resources.WatchTarget{{Unit: s.name}}
}
