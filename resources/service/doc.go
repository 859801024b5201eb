// Package service is the service resource type ("service", as in CCM): a
// system service running or stopped and, optionally, enabled at boot or
// not, through the systemd provider (systemctl). A refresh from a
// subscribed resource restarts a running service.
//
// Every systemctl call goes through Env.Runner; tests replay systemctl's
// outputs from testdata/. On a host that was not booted with systemd the
// resource fails and says so.
package service
