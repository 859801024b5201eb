// Package builtin assembles the registry of the resource types manifold
// ships. Workers and the coordinator's validation call Registry once at
// start-up and pass the result explicitly.
package builtin

import (
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/exec"
	"github.com/manifold-run/manifold/resources/file"
	"github.com/manifold-run/manifold/resources/pkg"
	"github.com/manifold-run/manifold/resources/service"
)

// Registry returns a new registry holding every built-in type: file and
// exec, package, service. Each call returns a fresh registry, so callers (tests) may register
// more types without affecting others.
func Registry() *resources.Registry {
	r := resources.NewRegistry()
	r.Register(file.Type, file.New, resources.WithProperties(file.Properties{}))
	r.Register(exec.Type, exec.New, resources.WithProperties(exec.Properties{}))
	r.Register(pkg.Type, pkg.New, resources.WithProperties(pkg.Properties{}))
	r.Register(service.Type, service.New, resources.WithProperties(service.Properties{}))
	return r
}
