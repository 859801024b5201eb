package worker_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// webResource is a file whose resource registers the host as a web
// server (CCM's entry, templated with the host's facts and the run's data).
func webResource(path, ttl, check string) schemas.Resource {
	return schemas.Resource{Type: "file", Name: path, Ensure: "present", Properties: map[string]any{"content": "up\n"},
		HealthChecks: []map[string]any{{"command": check}},
		RegisterWhenStable: []map[string]any{{"cluster": "production", "service": "web", "protocol": "http",
			"address": "{{ Facts.network.primaryIP }}", "port": "{{ Data.web_port }}", "priority": 10, "ttl": ttl,
			"annotations": map[string]any{"hostname": "{{ Facts.host.info.hostname }}"}}}}
}

// TestRegisterWhenStableFeedsALoadBalancer: two workers register as web
// servers when their resources are applied and healthy; a third renders a
// haproxy-like file from registrations() (Jet); once the short TTL of one
// entry passes, the next render has only the other. A noop run and a
// failed health check register nothing.
func TestRegisterWhenStableFeedsALoadBalancer(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	for i, name := range []string{"web1", "web2"} {
		tb.start(t, worker.Config{Name: name, Facts: map[string]any{
			"network": map[string]any{"primaryIP": "10.0.0." + string(rune('1'+i))},
			"host":    map[string]any{"info": map[string]any{"hostname": name + ".example.com"}}}})
	}
	tb.start(t, worker.Config{Name: "lb"})
	dir := t.TempDir()
	pinned := func(n int, w string, r schemas.Resource) bus.Task {
		task := tb.task(n, r)
		task.Pool, task.Data = bus.PinnedPool(w), map[string]any{"web_port": 8080}
		return task
	}
	// Gates: noop and a CRITICAL health check register nothing.
	noop := pinned(1, "web1", webResource(filepath.Join(dir, "noop"), "10m", "true"))
	noop.Noop = true
	tb.publish(t, noop)
	require.Equal(t, bus.TaskChanged, tb.next(t).Status)
	tb.publish(t, pinned(2, "web2", webResource(filepath.Join(dir, "sick"), "10m", "exit 2")))
	require.Equal(t, bus.TaskFailed, tb.next(t).Status)
	got, err := tb.bus.Registrations(t.Context(), "*", "*", "*", "*")
	require.NoError(t, err)
	require.Empty(t, got, "noop and unhealthy resources must not register")

	tb.publish(t, pinned(3, "web1", webResource(filepath.Join(dir, "web1"), "10m", "true")))
	tb.publish(t, pinned(4, "web2", webResource(filepath.Join(dir, "web2"), "2s", "true")))
	for range 2 {
		o := tb.next(t)
		require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	}
	got, err = tb.bus.Registrations(t.Context(), "production", "http", "web", "*")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "10.0.0.1", got[0].Address)
	require.Equal(t, 8080, got[0].Port)
	require.Equal(t, "web1", got[0].Worker)
	require.Equal(t, "file#"+filepath.Join(dir, "web1"), got[0].Resource)
	require.Equal(t, map[string]string{"hostname": "web1.example.com"}, got[0].Annotations)

	backends := filepath.Join(dir, "backends.cfg")
	lb := schemas.Resource{Type: "file", Name: backends, Ensure: "present", Properties: map[string]any{
		"content": `{{ jet('backend web_servers\n[[ range _, e := registrations("production", "http", "web", "*") ]]  server [[ e.Address ]] [[ e.Address ]]:[[ e.Port ]] check weight [[ 256 - e.Priority ]]\n[[ end ]]') }}`}}
	render := func(n int) string {
		tb.publish(t, pinned(n, "lb", lb))
		o := tb.next(t)
		require.NotEqual(t, bus.TaskFailed, o.Status, "%+v", o)
		data, err := os.ReadFile(backends)
		require.NoError(t, err)
		return string(data)
	}
	require.Equal(t, "backend web_servers\n  server 10.0.0.1 10.0.0.1:8080 check weight 246\n  server 10.0.0.2 10.0.0.2:8080 check weight 246\n", render(5))

	// web2's entry expires with its 2s TTL (the server removes it).
	eventually(t, "web2's entry to expire", func() bool {
		got, err := tb.bus.Registrations(t.Context(), "*", "*", "*", "10.0.0.2")
		return err == nil && len(got) == 0
	})
	require.Equal(t, "backend web_servers\n  server 10.0.0.1 10.0.0.1:8080 check weight 246\n", render(6))
}

// TestRegisterWhenStableBadEntryFailsTheResource: an entry that renders
// invalid on the host fails the resource, naming the entry and the rule.
func TestRegisterWhenStableBadEntryFailsTheResource(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Facts: map[string]any{"network": map[string]any{"primaryIP": "not an address"}, "host": map[string]any{"info": map[string]any{"hostname": "h"}}}})
	r := webResource(filepath.Join(t.TempDir(), "f"), "10m", "true")
	task := tb.task(1, r)
	task.Data = map[string]any{"web_port": 8080}
	tb.publish(t, task)
	o := tb.next(t)
	require.Equal(t, bus.TaskFailed, o.Status)
	require.Contains(t, o.Error, `register_when_stable[0]: registration is invalid: address "not an address" is neither an IP address nor a host name`)
}
