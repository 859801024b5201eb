package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/CloudyKit/jet/v6"
)

// Registration is one live service entry as templates see it: CCM's
// template keys (Cluster, Service, Protocol, Address, Port, Priority,
// TTL, Annotations) and the worker that registered it.
type Registration struct {
	Cluster     string            `json:"cluster"`
	Service     string            `json:"service"`
	Protocol    string            `json:"protocol"`
	Address     string            `json:"address"`
	Port        int               `json:"port,omitempty"`
	Priority    int               `json:"priority"`
	TTL         string            `json:"ttl,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Worker      string            `json:"worker,omitempty"`
}

// Registrations is what registrations() returns, with CCM's transformers.
type Registrations []Registration

// RegistrationLookup returns the live entries matching cluster, protocol,
// service and address ("*" matches any); Scope.Registrations.
type RegistrationLookup func(cluster, protocol, service, address string) (Registrations, error)

// ErrNoRegistrations: registrations() was called where no bus is at hand
// (the coordinator's central checks leave such a property to the worker).
var ErrNoRegistrations = errors.New("registrations: no registration lookup here (it is answered on a worker connected to the bus)")

// registrations implements registrations(cluster, protocol, service,
// address).
func (s Scope) registrations(args ...string) (Registrations, error) {
	if len(args) != 4 {
		return nil, fmt.Errorf("registrations: takes 4 arguments (cluster, protocol, service, address; \"*\" for any), got %d", len(args))
	}
	if s.Registrations == nil {
		return nil, ErrNoRegistrations
	}
	if s.budget != nil {
		if err := s.budget.check(); err != nil {
			return nil, err
		}
	}
	out, err := s.Registrations(args[0], args[1], args[2], args[3])
	if err != nil {
		return nil, fmt.Errorf("registrations(%q, %q, %q, %q): %w", args[0], args[1], args[2], args[3], err)
	}
	if out == nil {
		out = Registrations{}
	}
	return out, nil
}

// jetRegistrations is registrations() for Jet.
func (s Scope) jetRegistrations(a jet.Arguments) reflect.Value {
	a.RequireNumOfArguments("registrations", 4, 4)
	args := make([]string, 4)
	for i := range args {
		v := a.Get(i)
		if !v.IsValid() || v.Kind() != reflect.String {
			a.Panicf("registrations: argument %d must be a string", i+1)
		}
		args[i] = v.String()
	}
	out, err := s.registrations(args...)
	if err != nil {
		a.Panicf("%w", err)
	}
	return reflect.ValueOf(out)
}

var promLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`) })

// PrometheusFileSD renders the entries as Prometheus file service
// discovery JSON, as CCM does: target groups by cluster, service and
// protocol ("address:port"; entries without a port left out). Entries
// whose service or protocol is "prometheus" are in unless annotated
// prometheus.io/scrape other than "true"; others only with
// prometheus.io/scrape "true". Labels: cluster, service, protocol and the
// first entry's annotations that are valid label names, not starting with
// "__", with a value.
func (r Registrations) PrometheusFileSD() (string, error) {
	type group struct {
		Labels  map[string]string `json:"labels"`
		Targets []string          `json:"targets"`
	}
	groups := map[[3]string]*group{}
	out := []*group{}
	for _, e := range r {
		if e.Port == 0 {
			continue
		}
		scrape, set := e.Annotations["prometheus.io/scrape"]
		if e.Service == "prometheus" || e.Protocol == "prometheus" {
			if set && scrape != "true" {
				continue
			}
		} else if scrape != "true" {
			continue
		}
		key := [3]string{e.Cluster, e.Service, e.Protocol}
		g := groups[key]
		if g == nil {
			g = &group{Labels: map[string]string{"cluster": e.Cluster, "service": e.Service, "protocol": e.Protocol}}
			for k, v := range e.Annotations {
				if v != "" && !strings.HasPrefix(k, "__") && promLabel().MatchString(k) {
					g.Labels[k] = v
				}
			}
			groups[key] = g
			out = append(out, g)
		}
		g.Targets = append(g.Targets, fmt.Sprintf("%s:%d", e.Address, e.Port))
	}
	j, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return "", fmt.Errorf("registrations: prometheus file SD: %w", err)
	}
	return string(j), nil
}
