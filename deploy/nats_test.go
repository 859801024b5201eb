package deploy_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// natsEnv is the environment the NATS configuration files read. The
// passwords are the development defaults of docker-compose.yml.
var natsEnv = map[string]string{
	"MANIFOLD_COORDINATOR_PASSWORD": "coordinator-dev",
	"MANIFOLD_WORKER_PASSWORD":      "worker-dev",
	"MANIFOLD_CLIENT_PASSWORD":      "client-dev",
	"NATS_SYSTEM_PASSWORD":          "sys-dev",
	"NATS_SERVER_NAME":              "nats-1",
}

func setNATSEnv(t *testing.T) {
	for k, v := range natsEnv {
		t.Setenv(k, v)
	}
}

// roles are the users of the MANIFOLD account.
var roles = []string{"coordinator", "worker", "client"}

// accountUsers returns the MANIFOLD account's users of a parsed NATS
// configuration (or of Helm's config.merge), by user name.
func accountUsers(t *testing.T, accounts any) map[string]map[string]any {
	t.Helper()
	acc, ok := dig(accounts, "MANIFOLD").(map[string]any)
	require.True(t, ok, "no MANIFOLD account")
	require.Equal(t, "enabled", acc["jetstream"], "the MANIFOLD account needs JetStream")
	list, ok := acc["users"].([]any)
	require.True(t, ok, "MANIFOLD has no users")
	users := map[string]map[string]any{}
	for _, u := range list {
		m := u.(map[string]any)
		users[m["user"].(string)] = m
	}
	return users
}

// permissions flattens a user's permissions to "publish.allow" -> subjects.
func permissions(t *testing.T, user map[string]any) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	perms, ok := user["permissions"].(map[string]any)
	require.True(t, ok, "user %v has no permissions", user["user"])
	for dir, v := range perms {
		for kind, list := range v.(map[string]any) {
			for _, s := range list.([]any) {
				out[dir+"."+kind] = append(out[dir+"."+kind], s.(string))
			}
		}
	}
	return out
}

func TestNATSConfigs(t *testing.T) {
	setNATSEnv(t)
	files := filesUnder(t, ".conf")
	for _, want := range []string{"nats-server.conf", "cluster.conf", "accounts.conf"} {
		require.Contains(t, files, filepath.Join("nats", want))
	}
	for _, path := range files {
		m, err := conf.ParseFile(path)
		require.NoError(t, err, path)
		if filepath.Base(path) == "accounts.conf" {
			continue // included by the others
		}
		// nats-server's own option processing: accounts, users and
		// permissions are checked, not only the syntax.
		opts, err := server.ProcessConfigFile(path)
		require.NoError(t, err, path)
		require.True(t, opts.JetStream, "%s: JetStream off", path)
		require.NotEmpty(t, opts.StoreDir, "%s: no JetStream store_dir", path)
		require.Equal(t, "SYS", opts.SystemAccount, path)
		users := accountUsers(t, m["accounts"])
		for _, role := range roles {
			require.Contains(t, users, role, "%s: user %s", path, role)
			p := permissions(t, users[role])
			require.NotEmpty(t, p["publish.allow"], "%s: %s may publish nothing", path, role)
			inbox := "_INBOX.>"
			if role == "worker" {
				inbox = bus.WorkerInboxPrefix + ".>"
			}
			require.Contains(t, p["subscribe.allow"], inbox, "%s: %s gets no replies", path, role)
		}
		if filepath.Base(path) == "cluster.conf" {
			require.Equal(t, "nats-1", opts.ServerName)
			require.Equal(t, "manifold", opts.Cluster.Name)
			require.Len(t, opts.Routes, 3, "%s: routes to the three nodes", path)
		}
	}
}

// TestPermissionNames checks that every stream, bucket and subject the
// permissions name is one of manifold's (bus/subjects.go, bus/api.go): a
// renamed stream must not silently leave a role without access.
func TestPermissionNames(t *testing.T) {
	setNATSEnv(t)
	m, err := conf.ParseFile(filepath.Join("nats", "accounts.conf"))
	require.NoError(t, err)
	streams := []string{bus.StreamRuns, bus.StreamTasks, bus.StreamPinned, bus.StreamHistory, bus.StreamEvents, bus.StreamRegistrations,
		"KV_" + bus.BucketRuns, "KV_" + bus.BucketWorkers, "KV_" + bus.BucketResults, "OBJ_" + bus.BucketBundles,
		"OBJ_" + bus.BucketReports, "OBJ_" + bus.BucketTasks, "KV_" + bus.BucketCancels, "KV_" + bus.BucketAssignments}
	buckets := []string{bus.BucketRuns, bus.BucketWorkers, bus.BucketResults, bus.BucketBundles, bus.BucketReports, bus.BucketTasks,
		bus.BucketCancels, bus.BucketAssignments}
	manifoldSubjects := []string{bus.SubjectRunSubmit, bus.SubjectAPIPrefix + ".>", bus.SubjectTasksAll,
		bus.SubjectOutcomesAll, bus.SubjectEventsAll, bus.SubjectControlPrefix + ".*.cancel", bus.SubjectPrefix + ".>",
		bus.SubjectConvergeAll, bus.SubjectRegistrationsAll, strings.TrimSuffix(bus.SubjectTasksAll, ">") + "*",
		strings.TrimSuffix(bus.SubjectPinnedAll, ">") + "*"}
	// $JS.API.<...>.<STREAM>[.rest], $JS.ACK.[<domain>.<hash>.]<STREAM>.>, $JS.FC.<STREAM>.>
	streamRef := regexp.MustCompile(`^\$JS\.(?:API\.(?:STREAM\.INFO|STREAM\.MSG\.GET|DIRECT\.GET|CONSUMER\.[A-Z]+(?:\.NEXT)?)|ACK(?:\.\*\.\*)?|FC)\.([^.>*]+)`)
	for name, u := range accountUsers(t, m["accounts"]) {
		for dir, subjects := range permissions(t, u) {
			for _, s := range subjects {
				switch {
				case strings.HasPrefix(s, "manifold."):
					require.Contains(t, manifoldSubjects, s, "%s %s: not a manifold subject", name, dir)
				case strings.HasPrefix(s, "$KV."), strings.HasPrefix(s, "$O."):
					bucket := strings.Split(s, ".")[1]
					if bucket != ">" {
						require.Contains(t, buckets, bucket, "%s %s: %s", name, dir, s)
					}
				case strings.HasPrefix(s, "$JS."):
					if sm := streamRef.FindStringSubmatch(s); sm != nil {
						require.Contains(t, streams, sm[1], "%s %s: %s names no manifold stream", name, dir, s)
					}
				}
			}
		}
	}
	// Worker task consumers are named tasks-<pool> on manifold.tasks.<pool>.
	w := permissions(t, accountUsers(t, m["accounts"])["worker"])["publish.allow"]
	require.Contains(t, w, "$JS.API.CONSUMER.CREATE."+bus.StreamTasks+".*."+strings.TrimSuffix(bus.TaskSubject("x"), "x")+"*")
	require.Contains(t, w, strings.TrimSuffix(bus.OutcomeSubject("x"), "x")+">")
	// Pinned tasks: read and deleted by subject in their own stream; the
	// worker is woken on its subject.
	for _, api := range []string{"STREAM.INFO.", "STREAM.MSG.GET.", "STREAM.MSG.DELETE."} {
		require.Contains(t, w, "$JS.API."+api+bus.StreamPinned)
	}
	ws := permissions(t, accountUsers(t, m["accounts"])["worker"])["subscribe.allow"]
	require.Contains(t, ws, strings.TrimSuffix(bus.PinnedSubject("x"), "x")+"*")
	require.Contains(t, ws, "$KV."+bus.BucketAssignments+".>", "the assignments watch is a subscription")
}

// TestHelmValuesMatchAccounts checks that the users and permissions the
// Helm values merge into the chart's nats.conf are those of accounts.conf.
func TestHelmValuesMatchAccounts(t *testing.T) {
	setNATSEnv(t)
	m, err := conf.ParseFile(filepath.Join("nats", "accounts.conf"))
	require.NoError(t, err)
	want := accountUsers(t, m["accounts"])
	docs := yamlDocs(t, filepath.Join("kubernetes", "nats-values.yaml"))
	require.Len(t, docs, 1)
	values := docs[0]
	require.Equal(t, true, dig(values, "config", "cluster", "enabled"))
	require.Equal(t, 3, dig(values, "config", "cluster", "replicas"))
	require.Equal(t, true, dig(values, "config", "jetstream", "enabled"))
	require.Equal(t, true, dig(values, "config", "jetstream", "fileStore", "enabled"))
	require.Equal(t, "SYS", dig(values, "config", "merge", "system_account"))
	natsVersion := goModVersion(t, "github.com/nats-io/nats-server/v2")
	tag, _ := dig(values, "container", "image", "tag").(string)
	require.True(t, strings.HasPrefix(tag, natsVersion), "chart image tag %q: want the version go.mod tests against (%s)", tag, natsVersion)
	got := accountUsers(t, dig(values, "config", "merge", "accounts"))
	require.ElementsMatch(t, keys(want), keys(got))
	env, _ := dig(values, "container", "env").(map[string]any)
	for name, u := range want {
		wp, gp := permissions(t, u), permissions(t, got[name])
		require.Equal(t, wp, gp, "user %s: permissions differ between nats/accounts.conf and kubernetes/nats-values.yaml", name)
		pw, _ := got[name]["password"].(string)
		ref := regexp.MustCompile(`^<<\s*\$(\w+)\s*>>$`).FindStringSubmatch(pw)
		require.NotNil(t, ref, "user %s: password %q should be a << $VAR >> reference", name, pw)
		require.Contains(t, env, ref[1], "user %s: container.env does not set %s", name, ref[1])
	}
}

func keys[M ~map[string]V, V any](m M) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestComposePasswordsMatch checks that docker-compose.yml gives each
// manifold service the password the NATS nodes expect for its role.
func TestComposePasswordsMatch(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	for _, svc := range []string{"coordinator", "worker"} {
		cmd := strings.Join(c.Services[svc].Command, " ")
		require.Contains(t, cmd, "--user="+svc)
		envVar := "MANIFOLD_" + strings.ToUpper(svc) + "_PASSWORD"
		require.Contains(t, cmd, "--password=${"+envVar+":-"+natsEnv[envVar]+"}")
		for _, node := range []string{"nats-1", "nats-2", "nats-3"} {
			require.Equal(t, "${"+envVar+":-"+natsEnv[envVar]+"}", c.Services[node].Environment[envVar], "%s: %s", node, envVar)
		}
	}
}
