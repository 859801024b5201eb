// Package builtin assembles the registry of the resource types manifold
// ships. Workers and the coordinator's validation call Registry once at
// start-up and pass the result explicitly.
package builtin

import (
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/archive"
	"github.com/manifold-run/manifold/resources/document"
	"github.com/manifold-run/manifold/resources/exec"
	"github.com/manifold-run/manifold/resources/file"
	"github.com/manifold-run/manifold/resources/group"
	"github.com/manifold-run/manifold/resources/http"
	"github.com/manifold-run/manifold/resources/pkg"
	"github.com/manifold-run/manifold/resources/scaffold"
	"github.com/manifold-run/manifold/resources/service"
	"github.com/manifold-run/manifold/resources/user"
)

// Config is what built-in types share within a process.
type Config struct {
	// Documents configures the document type (NATS buckets for kv://
	// documents, the fallback state directory).
	Documents document.Config
}

// Registry returns a new registry holding every built-in type: file, exec,
// archive, http, document (whose kv:// documents need RegistryWith and a
// bus), package, service, user, group and scaffold. Each call returns a fresh registry, so callers
// (tests) may register more types without affecting others.
func Registry() *resources.Registry {
	return RegistryWith(Config{})
}

// RegistryWith is Registry with the types configured by cfg.
func RegistryWith(cfg Config) *resources.Registry {
	r := resources.NewRegistry()
	r.Register(file.Type, file.New, resources.WithProperties(file.Properties{}))
	r.Register(exec.Type, exec.New, resources.WithProperties(exec.Properties{}))
	r.Register(archive.Type, archive.New, resources.WithProperties(archive.Properties{}))
	r.Register(http.Type, http.New, resources.WithProperties(http.Properties{}))
	r.Register(pkg.Type, pkg.New, resources.WithProperties(pkg.Properties{}))
	r.Register(service.Type, service.New, resources.WithProperties(service.Properties{}))
	r.Register(group.Type, group.New, resources.WithProperties(group.Properties{}))
	r.Register(user.Type, user.New, resources.WithProperties(user.Properties{}))
	r.Register(scaffold.Type, scaffold.New, resources.WithProperties(scaffold.Properties{}))
	r.Register(document.Type, document.NewFactory(cfg.Documents), resources.WithProperties(document.Properties{}))
	return r
}
