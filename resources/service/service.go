package service

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// Type is the resource type name, as written in manifests.
const Type = "service"

// MaxName is the longest service name accepted, in bytes (systemd's own
// limit on unit names).
const MaxName = 255

// Ensure is the desired run state of a service.
type Ensure string

const (
	// EnsureRunning wants the service running (the default).
	EnsureRunning Ensure = "running"
	// EnsureStopped wants it stopped.
	EnsureStopped Ensure = "stopped"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9:_.@-]*$`)

// Properties are the service type's own properties (CCM's).
type Properties struct {
	// Enable, when set, wants the service enabled at boot (true) or not
	// (false); nil leaves enablement unmanaged.
	Enable *bool `json:"enable,omitempty"`
}

// Unit is the state of one service as its manager reports it.
type Unit struct {
	// Running is true when the unit is active (or activating, reloading).
	Running bool
	// Enabled is true when the unit starts at boot.
	Enabled bool
	// EnableState is the manager's word for it ("enabled", "static").
	EnableState string
	// Toggleable is false when enablement cannot be changed (static units).
	Toggleable bool
	// Masked is true for a masked unit.
	Masked bool
	// NeedReload is true when the unit's files changed on disk since the
	// manager last read them.
	NeedReload bool
}

// Manager is what a provider does for the service type.
type Manager interface {
	// Status reads the unit; an unknown unit wraps ErrUnitNotFound.
	Status(ctx context.Context, name string) (Unit, error)
	// Reload makes the manager re-read unit files (systemctl daemon-reload).
	Reload(ctx context.Context) error
	// Do runs one action on the unit: start, stop, restart, enable, disable.
	Do(ctx context.Context, action, name string) error
}

// Providers are the service providers: systemd.
var Providers = newProviders(systemdBooted)

// Service is one service resource. Build it with New.
type Service struct {
	name      string
	ensure    Ensure
	provider  string
	props     Properties
	providers *resources.Providers[Manager]
}

var (
	_ resources.Resource  = (*Service)(nil)
	_ resources.Refresher = (*Service)(nil)
	_ resources.Factory   = New
)

// New is the service type's resources.Factory. An empty ensure means
// running.
func New(spec resources.Spec) (resources.Resource, error) {
	s := &Service{name: spec.Name, ensure: Ensure(spec.Ensure), provider: spec.Provider, providers: Providers}
	if err := resources.DecodeProperties(spec.Properties, &s.props); err != nil {
		return nil, err
	}
	if s.ensure == "" {
		s.ensure = EnsureRunning
	}
	return s, nil
}

// Validate checks the name, ensure and provider without touching the
// system.
func (s *Service) Validate() error {
	switch {
	case s.name == "" || len(s.name) > MaxName:
		return fmt.Errorf("name %q: %w: length %d, want 1 to %d bytes", s.name, ErrInvalidName, len(s.name), MaxName)
	case !namePattern.MatchString(s.name):
		return fmt.Errorf("name %q: %w: only letters, digits and : _ . @ - are allowed, not first -", s.name, ErrInvalidName)
	}
	switch s.ensure {
	case EnsureRunning, EnsureStopped:
	default:
		return fmt.Errorf("ensure %q: want running or stopped", s.ensure)
	}
	return s.providers.Check(s.provider)
}

// Refreshable reports whether a refresh acts: it restarts a service that
// should run. A service that should be stopped ignores refreshes.
func (s *Service) Refreshable() bool { return s.ensure == EnsureRunning }

// CheckApply compares the unit with ensure and enable and, with apply,
// reloads unit files when systemd says they changed, enables or disables,
// starts or stops; on a refresh it restarts a service that was already
// running (one it just started is not restarted again).
func (s *Service) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if env == nil {
		env = &resources.Env{}
	}
	mgr, _, err := s.providers.Select(ctx, env, s.provider)
	if err != nil {
		return resources.Result{}, err
	}
	u, err := mgr.Status(ctx, s.name)
	if errors.Is(err, ErrUnitNotFound) && !apply && env.Assumed().Package(s.name) {
		return s.fromAssumedPackage(), nil
	}
	if err != nil {
		return resources.Result{}, err
	}
	var actions []string
	if u.NeedReload {
		actions = append(actions, "daemon-reload")
	}
	if want := s.props.Enable; want != nil && *want != u.Enabled {
		switch {
		case u.Masked:
			return resources.Result{}, fmt.Errorf("enable %v: %w (systemctl unmask %s first)", *want, ErrUnitMasked, s.name)
		case !u.Toggleable:
			return resources.Result{}, fmt.Errorf("enable %v: %w: it is %s", *want, ErrNotToggleable, u.EnableState)
		case *want:
			actions = append(actions, "enable")
		default:
			actions = append(actions, "disable")
		}
	}
	started := false
	switch {
	case s.ensure == EnsureRunning && !u.Running:
		if u.Masked {
			return resources.Result{}, fmt.Errorf("ensure running: %w (systemctl unmask %s first)", ErrUnitMasked, s.name)
		}
		actions = append(actions, "start")
		started = true
	case s.ensure == EnsureStopped && u.Running:
		actions = append(actions, "stop")
	}
	if apply && env.Refresh && s.ensure == EnsureRunning && !started {
		actions = append(actions, "restart")
	}
	res := resources.Result{Changed: len(actions) > 0, Message: strings.Join(actions, ", ")}
	if !res.Changed {
		res.Message = fmt.Sprintf("%s, %s", s.ensure, u.EnableState)
		return res, nil
	}
	if !apply {
		return res, nil
	}
	for _, a := range actions {
		if a == "daemon-reload" {
			err = mgr.Reload(ctx)
		} else {
			err = mgr.Do(ctx, a, s.name)
		}
		if err != nil {
			return resources.Result{}, fmt.Errorf("%s: %w", a, err)
		}
	}
	return res, nil
}

// fromAssumedPackage is the check of a unit that does not exist yet, in a
// noop run that would install the package of the same name first: the
// unit it would bring is taken as stopped and disabled, so the dry run
// answers what the real run would do rather than "unit not found".
func (s *Service) fromAssumedPackage() resources.Result {
	var actions []string
	if want := s.props.Enable; want != nil && *want {
		actions = append(actions, "enable")
	}
	if s.ensure == EnsureRunning {
		actions = append(actions, "start")
	}
	note := fmt.Sprintf("(package %s, which this run installs, brings the unit)", s.name)
	if len(actions) == 0 {
		return resources.Result{Message: fmt.Sprintf("%s, disabled %s", s.ensure, note)}
	}
	return resources.Result{Changed: true, Message: strings.Join(actions, ", ") + " " + note}
}
