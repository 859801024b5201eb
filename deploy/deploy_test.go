// Package deploy_test checks the deployment files in deploy/: the YAML
// parses, the images and files they name exist, every `manifold` command
// line they hold names a real command and real flags of the binary built
// from this repository, the NATS configuration parses with nats-server's
// own parser, and the systemd units are complete. permissions_test.go runs
// a coordinator, a worker and clients against nats-server.conf to prove the
// per-role permissions are enough, and no more.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// Set by TestMain.
var (
	// manifoldBin is the binary built from ./cmd/manifold.
	manifoldBin string
	// moduleRoot is the directory holding go.mod.
	moduleRoot string
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy: go env GOMOD:", err)
		return 1
	}
	moduleRoot = filepath.Dir(strings.TrimSpace(string(out)))
	dir, err := os.MkdirTemp("", "manifold-deploy-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	manifoldBin = filepath.Join(dir, "manifold")
	build := exec.Command("go", "build", "-o", manifoldBin, "./cmd/manifold")
	build.Dir = moduleRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "deploy: build manifold:", err)
		return 1
	}
	return m.Run()
}

// filesUnder returns the files under deploy/ (the test's working
// directory) whose names end with one of suffixes.
func filesUnder(t *testing.T, suffixes ...string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(path, s) }) {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, files, "no %v files under deploy/", suffixes)
	return files
}

// yamlDocs decodes every document of a (multi-document) YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, path)
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	return docs
}

func TestYAMLFilesParse(t *testing.T) {
	t.Parallel()
	for _, path := range filesUnder(t, ".yml", ".yaml") {
		docs := yamlDocs(t, path)
		require.NotEmpty(t, docs, "%s holds no YAML document", path)
		if strings.HasPrefix(path, "kubernetes/") && !strings.HasSuffix(path, "-values.yaml") {
			for i, doc := range docs {
				require.NotEmpty(t, doc["apiVersion"], "%s: document %d has no apiVersion", path, i+1)
				require.NotEmpty(t, doc["kind"], "%s: document %d has no kind", path, i+1)
				require.NotEmpty(t, dig(doc, "metadata", "name"), "%s: document %d has no metadata.name", path, i+1)
			}
		}
	}
}

// dig walks nested maps.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image         string         `yaml:"image"`
	Build         *composeBuild  `yaml:"build"`
	Command       []string       `yaml:"command"`
	ContainerName string         `yaml:"container_name"`
	Ports         []string       `yaml:"ports"`
	Volumes       []string       `yaml:"volumes"`
	Environment   map[string]any `yaml:"environment"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(data, &c))
	return c
}

// goModVersion returns the version go.mod requires of module, or the go
// directive's version for "go".
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	require.NoError(t, err)
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+v?(\S+)`)
	m := re.FindSubmatch(data)
	require.NotNil(t, m, "go.mod does not name %s", module)
	return string(m[1])
}

// isManifoldImage reports whether image is the one deploy/Dockerfile
// builds (manifold:<tag>, or <registry>/manifold:<tag>).
func isManifoldImage(image string) bool {
	name, _, _ := strings.Cut(image, ":")
	return name == "manifold" || strings.HasSuffix(name, "/manifold") || strings.Contains(image, "MANIFOLD_IMAGE")
}

func TestComposeFile(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	natsVersion := goModVersion(t, "github.com/nats-io/nats-server/v2")
	for _, name := range []string{"nats-1", "nats-2", "nats-3", "jaeger", "coordinator", "worker"} {
		require.Contains(t, c.Services, name, "docker-compose.yml: service %s", name)
	}
	for name, s := range c.Services {
		require.NotEmpty(t, s.Image, "service %s names no image", name)
		if s.Build != nil {
			ctx := filepath.Join(".", s.Build.Context)
			require.FileExists(t, filepath.Join(ctx, "go.mod"), "service %s: build context %s is not the module root", name, s.Build.Context)
			require.FileExists(t, filepath.Join(ctx, s.Build.Dockerfile), "service %s: Dockerfile", name)
			require.Equal(t, "deploy/Dockerfile", s.Build.Dockerfile, "service %s", name)
		}
		switch {
		case isManifoldImage(s.Image):
			require.NotNil(t, s.Build, "service %s runs manifold but does not build deploy/Dockerfile", name)
			require.NotEmpty(t, s.Command, "service %s runs manifold without a command", name)
		default:
			repo, tag, ok := strings.Cut(s.Image, ":")
			require.True(t, ok && tag != "" && tag != "latest", "service %s: image %q must pin a tag", name, s.Image)
			switch repo {
			case "nats":
				require.True(t, strings.HasPrefix(tag, natsVersion), "service %s: image %s: the NATS server should be the version go.mod tests against (%s)", name, s.Image, natsVersion)
			case "jaegertracing/jaeger":
				require.True(t, strings.HasPrefix(tag, "2."), "service %s: Jaeger v2 image wanted, got %s", name, s.Image)
			default:
				t.Errorf("service %s: unexpected image %s", name, s.Image)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				require.FileExists(t, filepath.Join(src, "cluster.conf"), "service %s mounts %s", name, src)
				continue
			}
			require.Contains(t, c.Volumes, src, "service %s: named volume %s is not declared", name, src)
		}
	}
	// The NATS nodes name each other in cluster.conf and each has its own
	// name and store.
	for _, name := range []string{"nats-1", "nats-2", "nats-3"} {
		s := c.Services[name]
		require.Equal(t, name, s.Environment["NATS_SERVER_NAME"], "service %s", name)
		require.Equal(t, []string{"--config", "/etc/nats/cluster.conf"}, s.Command, "service %s", name)
		require.Contains(t, s.Volumes, name+"-data:/data", "service %s", name)
	}
	// Workers scale with --scale: nothing fixed per container.
	w := c.Services["worker"]
	require.Empty(t, w.ContainerName, "worker must not set container_name: it could not be scaled")
	require.Empty(t, w.Ports, "worker must not publish host ports: it could not be scaled")
	// The coordinator provisions R3 on the three nodes and exports to Jaeger.
	co := strings.Join(c.Services["coordinator"].Command, " ")
	for _, want := range []string{"--server=nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222", "--replicas=3", "--otlp-endpoint=http://jaeger:4318", "--metrics-listen=:9464"} {
		require.Contains(t, co, want)
	}
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	text := string(data)
	goVersion := goModVersion(t, "go")
	major, minor, _ := strings.Cut(goVersion, ".")
	minor, _, _ = strings.Cut(minor, ".")
	require.Contains(t, text, "ARG GO_VERSION="+major+"."+minor+"\n", "the build stage should use go.mod's Go version")
	require.Contains(t, text, "FROM golang:${GO_VERSION} AS build")
	require.Contains(t, text, "CGO_ENABLED=0")
	require.Contains(t, text, "./cmd/manifold")
	require.DirExists(t, filepath.Join(moduleRoot, "cmd", "manifold"))
	// The version is stamped into the variable the CLI prints.
	require.Contains(t, text, "github.com/manifold-run/manifold/internal/cli.Version=")
	cli, err := os.ReadFile(filepath.Join(moduleRoot, "internal", "cli", "cli.go"))
	require.NoError(t, err)
	require.Contains(t, string(cli), "var Version = ")
	require.Regexp(t, `(?m)^COPY --from=build /out/manifold /usr/local/bin/manifold$`, text)
	require.Regexp(t, `(?m)^ENTRYPOINT \[.*"/usr/local/bin/manifold"\]$`, text)
	user := regexp.MustCompile(`(?m)^USER (\S+)$`).FindAllStringSubmatch(text, -1)
	require.NotEmpty(t, user, "the runtime image must set a USER")
	last := user[len(user)-1][1]
	require.NotContains(t, []string{"root", "0", "0:0"}, last, "the runtime image must not run as root")
	stages := regexp.MustCompile(`(?m)^FROM `).FindAllStringIndex(text, -1)
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage build wanted")
}

// cmdLine is one `manifold ...` invocation found in a deploy file.
type cmdLine struct {
	where string
	args  []string // args[0] is the command
}

func TestManifoldCommandLines(t *testing.T) {
	t.Parallel()
	lines := composeCommandLines(t)
	lines = append(lines, kubernetesCommandLines(t)...)
	lines = append(lines, systemdCommandLines(t)...)
	lines = append(lines, readmeCommandLines(t)...)
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l.args[0]] = true
	}
	for _, cmd := range []string{"server", "coordinator", "worker", "run"} {
		require.True(t, seen[cmd], "no deploy file runs `manifold %s`", cmd)
	}
	var h helpCache
	for _, l := range lines {
		cmd := l.args[0]
		help, ok := h.get(t, cmd)
		if !ok {
			t.Errorf("%s: `manifold %s` is not a command (manifold %s --help fails)", l.where, cmd, cmd)
			continue
		}
		for _, a := range l.args[1:] {
			if !strings.HasPrefix(a, "--") || a == "--" {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(help) {
				continue
			}
			t.Errorf("%s: manifold %s has no flag --%s", l.where, cmd, name)
		}
	}
}

// helpCache runs `manifold <cmd> --help` once per command.
type helpCache struct {
	mu   sync.Mutex
	help map[string]*string
}

func (h *helpCache) get(t *testing.T, cmd string) (string, bool) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.help == nil {
		h.help = map[string]*string{}
	}
	if s, ok := h.help[cmd]; ok {
		return deref(s)
	}
	out, err := exec.Command(manifoldBin, cmd, "--help").CombinedOutput()
	if err != nil {
		h.help[cmd] = nil
		return "", false
	}
	s := string(out)
	h.help[cmd] = &s
	return s, true
}

func deref(s *string) (string, bool) {
	if s == nil {
		return "", false
	}
	return *s, true
}

func composeCommandLines(t *testing.T) []cmdLine {
	t.Helper()
	var lines []cmdLine
	for name, s := range readCompose(t).Services {
		if isManifoldImage(s.Image) {
			lines = append(lines, cmdLine{"docker-compose.yml service " + name, s.Command})
		}
	}
	return lines
}

func kubernetesCommandLines(t *testing.T) []cmdLine {
	t.Helper()
	var lines []cmdLine
	for _, path := range filesUnder(t, ".yaml") {
		if !strings.HasPrefix(path, "kubernetes/") {
			continue
		}
		for _, doc := range yamlDocs(t, path) {
			containers, _ := dig(doc, "spec", "template", "spec", "containers").([]any)
			for _, c := range containers {
				image, _ := dig(c, "image").(string)
				if !isManifoldImage(image) {
					continue
				}
				var args []string
				for _, key := range []string{"command", "args"} {
					list, _ := dig(c, key).([]any)
					for _, a := range list {
						args = append(args, fmt.Sprint(a))
					}
				}
				require.NotEmpty(t, args, "%s: %s container runs manifold without args", path, doc["kind"])
				lines = append(lines, cmdLine{fmt.Sprintf("%s %s %v", path, doc["kind"], dig(doc, "metadata", "name")), args})
			}
		}
	}
	require.NotEmpty(t, lines, "no Kubernetes workload runs manifold")
	return lines
}

// unitFile is a parsed systemd unit: section -> key -> values.
type unitFile map[string]map[string][]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok && section != "", "%s:%d: want key=value inside a section: %q", path, n, line)
			u[section][k] = append(u[section][k], v)
		}
	}
	require.NoError(t, sc.Err())
	return u
}

// systemdCommandLines returns the ExecStart lines of the units plus, for
// each, the flags the example environment files put in *_ARGS variables.
func systemdCommandLines(t *testing.T) []cmdLine {
	t.Helper()
	var lines []cmdLine
	for _, path := range filesUnder(t, ".service") {
		u := readUnit(t, path)
		for _, exec := range u["Service"]["ExecStart"] {
			f := strings.Fields(exec)
			require.Equal(t, "/usr/local/bin/manifold", f[0], "%s: ExecStart", path)
			var args []string
			for _, a := range f[1:] {
				if !strings.HasPrefix(a, "$") {
					args = append(args, a)
				}
			}
			lines = append(lines, cmdLine{path + " ExecStart", args})
		}
	}
	for _, path := range filesUnder(t, ".env.example") {
		cmd := strings.TrimSuffix(filepath.Base(path), ".env.example")
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			k, v, ok := strings.Cut(line, "=")
			if !ok || strings.HasPrefix(k, "#") || !strings.HasSuffix(k, "_ARGS") {
				continue
			}
			lines = append(lines, cmdLine{path + " " + k, append([]string{cmd}, strings.Fields(v)...)})
		}
	}
	return lines
}

// readmeCommandLines returns the `manifold <command> ...` lines of
// deploy/README.md's code blocks.
func readmeCommandLines(t *testing.T) []cmdLine {
	t.Helper()
	data, err := os.ReadFile("README.md")
	require.NoError(t, err)
	var lines []cmdLine
	inCode := false
	re := regexp.MustCompile(`^(?:\S+=\S+\s+)*manifold\s+([a-z]+)(.*)$`)
	for n, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		if !inCode {
			continue
		}
		m := re.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		rest, _, _ := strings.Cut(m[2], "#")
		lines = append(lines, cmdLine{fmt.Sprintf("README.md:%d", n+1), append([]string{m[1]}, strings.Fields(rest)...)})
	}
	require.NotEmpty(t, lines, "README.md shows no manifold command")
	return lines
}

func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	units := filesUnder(t, ".service")
	for _, want := range []string{"manifold-server.service", "manifold-coordinator.service", "manifold-worker@.service"} {
		require.Contains(t, units, filepath.Join("systemd", want))
	}
	for _, path := range units {
		u := readUnit(t, path)
		for _, section := range []string{"Unit", "Service", "Install"} {
			require.Contains(t, u, section, "%s: [%s]", path, section)
		}
		s := u["Service"]
		require.Len(t, s["ExecStart"], 1, "%s: one ExecStart", path)
		require.True(t, strings.HasPrefix(s["ExecStart"][0], "/usr/local/bin/manifold "), "%s: ExecStart runs manifold", path)
		require.Equal(t, []string{"on-failure"}, s["Restart"], "%s: Restart", path)
		require.Equal(t, []string{"SIGTERM"}, s["KillSignal"], "%s: KillSignal", path)
		require.NotEmpty(t, s["TimeoutStopSec"], "%s: TimeoutStopSec", path)
		require.NotEmpty(t, s["EnvironmentFile"], "%s: EnvironmentFile", path)
		require.NotEmpty(t, u["Install"]["WantedBy"], "%s: WantedBy", path)
	}
	w := readUnit(t, filepath.Join("systemd", "manifold-worker@.service"))
	require.Equal(t, []string{"/etc/manifold/%i.env"}, w["Service"]["EnvironmentFile"])
	require.Contains(t, w["Service"]["ExecStart"][0], " --pool %i ")
}

// run runs the binary and returns its exit code and combined output.
func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(manifoldBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String()
	}
	require.NoError(t, err)
	return 0, out.String()
}
