package group

import (
	"context"
	"fmt"
	"strconv"

	"github.com/manifold-run/manifold/resources"
)

// Type is the resource type name, as written in manifests.
const Type = "group"

// Ensure is the desired state of a group.
type Ensure string

const (
	// EnsurePresent wants the group to exist (the default).
	EnsurePresent Ensure = "present"
	// EnsureAbsent wants it removed.
	EnsureAbsent Ensure = "absent"
)

// Properties are the group type's own properties.
type Properties struct {
	// GID is the group's numeric id; unset leaves it to groupadd on
	// creation and unmanaged afterwards.
	GID ID `json:"gid,omitempty"`
	// System creates a system group (groupadd -r: a gid from the system
	// range). It only matters on creation.
	System bool `json:"system,omitempty"`
}

// Group is one group resource. Build it with New.
type Group struct {
	name   string
	ensure Ensure
	props  Properties
	// file is the group database read for the current state.
	file string
}

var (
	_ resources.Resource = (*Group)(nil)
	_ resources.Factory  = New
)

// New is the group type's resources.Factory. An empty ensure means
// present.
func New(spec resources.Spec) (resources.Resource, error) {
	g := &Group{name: spec.Name, ensure: Ensure(spec.Ensure), file: DefaultFile}
	if err := resources.DecodeProperties(spec.Properties, &g.props); err != nil {
		return nil, err
	}
	if g.ensure == "" {
		g.ensure = EnsurePresent
	}
	if spec.Provider != "" {
		return nil, fmt.Errorf("provider %q: %w of %s (known: none, groupadd is the only implementation)", spec.Provider, resources.ErrUnknownProvider, Type)
	}
	return g, nil
}

// Validate checks the name, ensure and gid without touching the system.
func (g *Group) Validate() error {
	if err := CheckName(g.name); err != nil {
		return fmt.Errorf("name %q: %w", g.name, err)
	}
	switch g.ensure {
	case EnsurePresent, EnsureAbsent:
	default:
		return fmt.Errorf("ensure %q: want present or absent", g.ensure)
	}
	if g.props.GID != "" {
		if _, err := g.props.GID.Number(); err != nil {
			return fmt.Errorf("gid: %w", err)
		}
	}
	return nil
}

// CheckApply reads the group from the database and, with apply, creates
// it (groupadd), changes its gid (groupmod -g) or removes it (groupdel).
func (g *Group) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	db, err := ReadFile(g.file)
	if err != nil {
		return resources.Result{}, err
	}
	have, exists := db.ByName(g.name)
	var (
		argv []string
		res  resources.Result
		done string
	)
	switch {
	case g.ensure == EnsureAbsent && !exists:
		return resources.Result{Message: "absent"}, nil
	case g.ensure == EnsureAbsent:
		argv = []string{"groupdel", g.name}
		res, done = resources.Result{Changed: true, Message: "remove"}, "removed"
	case !exists:
		argv = []string{"groupadd"}
		if g.props.GID != "" {
			argv = append(argv, "-g", string(g.props.GID))
		}
		if g.props.System {
			argv = append(argv, "-r")
		}
		argv = append(argv, g.name)
		res, done = resources.Result{Changed: true, Message: "create"}, "created"
	default:
		if g.props.GID == "" {
			return resources.Result{Message: fmt.Sprintf("present, gid %d", have.GID)}, nil
		}
		want, _ := g.props.GID.Number() // checked by Validate
		if want == have.GID {
			return resources.Result{Message: fmt.Sprintf("present, gid %d", have.GID)}, nil
		}
		argv = []string{"groupmod", "-g", strconv.FormatUint(uint64(want), 10), g.name}
		res = resources.Result{Changed: true, Message: fmt.Sprintf("set gid %d (is %d)", want, have.GID),
			Diff: fmt.Sprintf("-gid: %d\n+gid: %d\n", have.GID, want)}
		done = fmt.Sprintf("set gid %d (was %d)", want, have.GID)
	}
	if !apply {
		return res, nil
	}
	if err := Run(ctx, env, argv...); err != nil {
		return resources.Result{}, fmt.Errorf("%s: %w", res.Message, err)
	}
	res.Message = done
	return res, nil
}
