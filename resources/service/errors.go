package service

import "errors"

var (
	// ErrInvalidName is wrapped by the validation error of a unit name
	// outside [A-Za-z0-9:_.@-] or longer than MaxName.
	ErrInvalidName = errors.New("invalid service name")
	// ErrUnitNotFound is returned for a service systemd does not know.
	ErrUnitNotFound = errors.New("unit not found")
	// ErrUnitMasked is returned when a masked unit should run or be enabled.
	ErrUnitMasked = errors.New("unit is masked")
	// ErrNotToggleable is returned when enable asks to change a unit whose
	// enablement systemd does not let systemctl change (static, generated,
	// transient, indirect).
	ErrNotToggleable = errors.New("unit cannot be enabled or disabled")
	// ErrCommandFailed is wrapped by the error of a systemctl call that
	// failed.
	ErrCommandFailed = errors.New("systemctl failed")
)
