package resources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Spec is one resource ready to build: its properties are already rendered
// (no template expressions left).
type Spec struct {
	// Type is the resource type ("file", "exec").
	Type string
	// Name is the resource's name (a path for file, a command for exec).
	Name string
	// Ensure is the desired state; empty means the type's default.
	Ensure string
	// Provider forces a provider; empty means the type picks one.
	Provider string
	// Properties are the type-specific properties.
	Properties map[string]any
}

// Ref returns the spec's reference, "type#name".
func (s Spec) Ref() string { return s.Type + "#" + s.Name }

// Factory builds a Resource of one type from its Spec. It decodes and keeps
// the properties; it neither validates (Registry.New calls Validate) nor
// touches the system.
type Factory func(spec Spec) (Resource, error)

// Registry maps type names to factories. Fill it once at start-up with
// Register, then call New from any number of goroutines.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
	props     map[string]reflect.Type
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{factories: make(map[string]Factory), props: make(map[string]reflect.Type)}
}

// TypeOption describes a registered type beyond its factory.
type TypeOption func(*typeInfo)

type typeInfo struct {
	props reflect.Type
}

// WithProperties declares the struct a type decodes its properties into
// (pass its zero value: file.Properties{}). A test compares its json tags
// with the type's CUE definition field by field, so the two schemas of a
// type cannot drift apart.
func WithProperties(zero any) TypeOption {
	return func(ti *typeInfo) { ti.props = reflect.TypeOf(zero) }
}

// Register adds the factory of a type. It panics when typ is empty, f is nil
// or typ is already registered: all are programming errors.
func (r *Registry) Register(typ string, f Factory, opts ...TypeOption) {
	if typ == "" || f == nil {
		panic("resources: Register with an empty type or a nil factory")
	}
	var ti typeInfo
	for _, o := range opts {
		o(&ti)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.factories[typ]; dup {
		panic(fmt.Sprintf("resources: type %q registered twice", typ))
	}
	r.factories[typ] = f
	if ti.props != nil {
		r.props[typ] = ti.props
	}
}

// PropertiesType returns the properties struct declared WithProperties for
// typ, or nil when none was.
func (r *Registry) PropertiesType(typ string) reflect.Type {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.props[typ]
}

// New builds the resource of spec and validates it. An unregistered type
// gives an error wrapping ErrUnknownType; factory and Validate errors are
// wrapped with the resource's reference ("file#/etc/motd: ...").
func (r *Registry) New(spec Spec) (Resource, error) {
	r.mu.RLock()
	f, ok := r.factories[spec.Type]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s: %w %q", spec.Ref(), ErrUnknownType, spec.Type)
	}
	res, err := f(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Ref(), err)
	}
	if err := res.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", spec.Ref(), err)
	}
	return res, nil
}

// Types returns the registered type names, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	types := make([]string, 0, len(r.factories))
	for t := range r.factories {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

// DecodeProperties decodes a property map into into, a pointer to a struct
// whose fields carry `json` tags. Unknown properties are rejected, and
// errors name the property: `unknown property "mdoe"`,
// `property "mode": expected string, got number`.
func DecodeProperties(props map[string]any, into any) error {
	if len(props) == 0 {
		props = map[string]any{}
	}
	raw, err := json.Marshal(props)
	if err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err = dec.Decode(into)
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Errorf("property %q: expected %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown property %s", name)
	}
	return fmt.Errorf("properties: %w", err)
}
