// Package deploy holds manifold's deployment files (NATS configuration,
// systemd units, Kubernetes manifests, a Dockerfile). The binary embeds the
// per-role NATS permissions of nats/accounts.conf from it: `manifold server`
// gives its generated credentials exactly the permissions a site's own NATS
// configuration gives these roles.
package deploy

import _ "embed"

// AccountsConf is nats/accounts.conf.
//
//go:embed nats/accounts.conf
var AccountsConf string
