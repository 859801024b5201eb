package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources"
)

// newExec builds and validates an exec resource, failing the test on error.
func newExec(t *testing.T, spec resources.Spec) *Exec {
	t.Helper()
	spec.Type = Type
	r, err := New(spec)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return r.(*Exec)
}

// checkApply calls CheckApply and fails the test on error.
func checkApply(t *testing.T, e *Exec, env *resources.Env, apply bool) resources.Result {
	t.Helper()
	res, err := e.CheckApply(t.Context(), env, apply)
	if err != nil {
		t.Fatalf("CheckApply(apply=%v): %v", apply, err)
	}
	return res
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestRunsAndIsChanged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	e := newExec(t, resources.Spec{Name: "touch " + marker})
	env := &resources.Env{}

	res := checkApply(t, e, env, false)
	if !res.Changed || res.Message != "run touch "+marker {
		t.Errorf("check = %+v", res)
	}
	if exists(t, marker) {
		t.Fatal("check ran the command")
	}
	res = checkApply(t, e, env, true)
	if !res.Changed || res.Message != "ran touch "+marker {
		t.Errorf("apply = %+v", res)
	}
	if !exists(t, marker) {
		t.Error("apply did not run the command")
	}
	if e.Recheck() {
		t.Error("Recheck without creates = true")
	}
	if !e.Refreshable() {
		t.Error("Refreshable = false")
	}
}

func TestCreates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newExec(t, resources.Spec{Name: "make-out", Properties: map[string]any{
		"command": "touch out",
		"creates": "out", // relative: resolves against the working directory
	}})
	env := &resources.Env{WorkDir: dir}
	if !e.Recheck() {
		t.Error("Recheck with creates = false")
	}
	if res := checkApply(t, e, env, false); !res.Changed {
		t.Errorf("check before = %+v", res)
	}
	checkApply(t, e, env, true)
	if !exists(t, filepath.Join(dir, "out")) {
		t.Fatal("command did not run in WorkDir")
	}
	for _, apply := range []bool{false, true} {
		if res := checkApply(t, e, env, apply); res.Changed || res.Message != "creates out exists" {
			t.Errorf("CheckApply(apply=%v) after = %+v", apply, res)
		}
	}
}

func TestOnlyIfUnless(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flag := filepath.Join(dir, "flag")
	onlyIf := newExec(t, resources.Spec{Name: "true", Properties: map[string]any{"onlyif": "test -e " + flag}})
	unless := newExec(t, resources.Spec{Name: "true", Properties: map[string]any{"unless": "test -e " + flag}})
	env := &resources.Env{}

	if res := checkApply(t, onlyIf, env, false); res.Changed || !strings.HasPrefix(res.Message, "onlyif test -e") {
		t.Errorf("onlyif, no flag: %+v", res)
	}
	if res := checkApply(t, onlyIf, env, true); res.Changed {
		t.Errorf("onlyif, no flag, apply: %+v", res)
	}
	if res := checkApply(t, unless, env, false); !res.Changed {
		t.Errorf("unless, no flag: %+v", res)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := checkApply(t, onlyIf, env, false); !res.Changed {
		t.Errorf("onlyif, flag: %+v", res)
	}
	if res := checkApply(t, unless, env, false); res.Changed || res.Message != "unless test -e "+flag+" exited 0" {
		t.Errorf("unless, flag: %+v", res)
	}
}

func TestGuardThatCannotStartFails(t *testing.T) {
	t.Parallel()
	e := newExec(t, resources.Spec{Name: "true", Properties: map[string]any{"onlyif": "/nonexistent/guard"}})
	if _, err := e.CheckApply(t.Context(), &resources.Env{}, false); err == nil || !strings.Contains(err.Error(), "onlyif") {
		t.Errorf("err = %v, want an onlyif error", err)
	}
}

func TestRefreshOnly(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	e := newExec(t, resources.Spec{Name: "touch " + marker, Properties: map[string]any{"refreshonly": true}})

	for _, apply := range []bool{false, true} {
		if res := checkApply(t, e, &resources.Env{}, apply); res.Changed {
			t.Errorf("without refresh, apply=%v: %+v", apply, res)
		}
	}
	if exists(t, marker) {
		t.Fatal("refreshonly command ran without a refresh")
	}
	refresh := &resources.Env{Refresh: true}
	if res := checkApply(t, e, refresh, false); !res.Changed {
		t.Errorf("check with refresh: %+v", res)
	}
	if res := checkApply(t, e, refresh, true); !res.Changed || !exists(t, marker) {
		t.Errorf("apply with refresh: %+v, marker exists %v", res, exists(t, marker))
	}
}

func TestReturns(t *testing.T) {
	t.Parallel()
	e := newExec(t, resources.Spec{Name: "/bin/sh -c 'exit 2'", Properties: map[string]any{"returns": []any{0, 2}}})
	if res := checkApply(t, e, &resources.Env{}, true); !res.Changed || !strings.Contains(res.Message, "exit code 2") {
		t.Errorf("exit 2 with returns [0 2]: %+v", res)
	}

	e = newExec(t, resources.Spec{Name: "/bin/sh -c 'exit 3'", Properties: map[string]any{"returns": []int{0, 2}}})
	_, err := e.CheckApply(t.Context(), &resources.Env{}, true)
	var exitErr *ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode != 3 {
		t.Fatalf("exit 3 with returns [0 2]: err = %v", err)
	}
	if first, _, _ := strings.Cut(err.Error(), "\n"); first != "/bin/sh -c 'exit 3' exited with code 3, want one of [0 2]" {
		t.Errorf("first line = %q", first)
	}
}

func TestFailingCommandErrorText(t *testing.T) {
	t.Parallel()
	e := newExec(t, resources.Spec{Name: "fail", Provider: "shell", Properties: map[string]any{
		"command": "for i in $(seq 1 30); do echo out-$i; echo err-$i >&2; done; exit 5",
	}})
	_, err := e.CheckApply(t.Context(), &resources.Env{}, true)
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, want := range []string{"exited with code 5", "stderr:\n[... 20 lines]\nerr-21\n", "err-30", "stdout:\n[... 20 lines]\nout-21\n", "out-30"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "err-20\n") {
		t.Errorf("error keeps more than the last lines:\n%s", msg)
	}
}

func TestEnvironmentCwdPath(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nprintf '%s|%s|%s|%s' \"$1\" \"$GREETING\" \"$PATH\" \"$(pwd)\" > result\n"
	if err := os.WriteFile(filepath.Join(bin, "manifold-greet"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	path := bin + ":/usr/bin:/bin"
	e := newExec(t, resources.Spec{Name: "greet", Properties: map[string]any{
		"command":     `manifold-greet "hello world"`,
		"cwd":         "sub", // relative to WorkDir
		"environment": []string{"GREETING=hi there"},
		"path":        path,
	}})
	checkApply(t, e, &resources.Env{WorkDir: work}, true)
	got, err := os.ReadFile(filepath.Join(work, "sub", "result"))
	if err != nil {
		t.Fatal(err)
	}
	realSub, _ := filepath.EvalSymlinks(filepath.Join(work, "sub"))
	if want := "hello world|hi there|" + path + "|" + realSub; string(got) != want {
		t.Errorf("result = %q, want %q", got, want)
	}
}

func TestPosixHasNoShellFeatures(t *testing.T) {
	t.Parallel()
	e := newExec(t, resources.Spec{Name: `echo $HOME | tr 'a b' "c"`, Properties: map[string]any{"logoutput": true}})
	res := checkApply(t, e, &resources.Env{}, true)
	if want := "\n$HOME | tr a b c"; !strings.HasSuffix(res.Message, want) {
		t.Errorf("message = %q, want suffix %q", res.Message, want)
	}
}

func TestShellProvider(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newExec(t, resources.Spec{Name: "upper", Provider: "shell", Properties: map[string]any{
		"command": "echo abc | tr a-z A-Z > out && cat out",
		"unless":  "test -s out && grep -q X out",
		"cwd":     dir,
	}})
	res := checkApply(t, e, &resources.Env{}, true)
	if !res.Changed {
		t.Errorf("apply = %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "out")); string(got) != "ABC\n" {
		t.Errorf("out = %q", got)
	}
}

func TestTimeoutKillsCommand(t *testing.T) {
	t.Parallel()
	e := newExec(t, resources.Spec{Name: "sleep 30"})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.CheckApply(ctx, &resources.Env{}, true)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %v", elapsed)
	}
}

func TestUsesEnvRunner(t *testing.T) {
	t.Parallel()
	replay := resources.NewReplayRunner(
		resources.ReplayStep{Argv: []string{"check-it"}, ExitCode: 1},
		resources.ReplayStep{Argv: []string{"do", "it now"}, Stdout: "done\n"},
	)
	e := newExec(t, resources.Spec{Name: `do "it now"`, Properties: map[string]any{"unless": "check-it", "logoutput": true}})
	res := checkApply(t, e, &resources.Env{Runner: replay}, true)
	if res.Message != "ran do \"it now\"\ndone" {
		t.Errorf("message = %q", res.Message)
	}
	if err := replay.Verify(); err != nil {
		t.Error(err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		spec resources.Spec
		want string // substring of the error; empty means valid
	}{
		{"name is the command", resources.Spec{Name: "/bin/true"}, ""},
		{"shell", resources.Spec{Name: "x", Provider: "shell", Properties: map[string]any{"command": "a | b"}}, ""},
		{"ensure present", resources.Spec{Name: "true", Ensure: "present"}, ""},
		{"empty command", resources.Spec{Name: "  "}, `"command": empty`},
		{"unbalanced", resources.Spec{Name: `echo "hi`}, "unbalanced quote"},
		{"unbalanced onlyif", resources.Spec{Name: "true", Properties: map[string]any{"onlyif": "test 'x"}}, `"onlyif": unbalanced quote`},
		{"blank unless", resources.Spec{Name: "true", Properties: map[string]any{"unless": " "}}, `"unless": empty command`},
		{"empty returns", resources.Spec{Name: "true", Properties: map[string]any{"returns": []int{}}}, `"returns"`},
		{"bad environment", resources.Spec{Name: "true", Properties: map[string]any{"environment": []string{"FOO"}}}, `"FOO" is not KEY=VALUE`},
		{"empty env key", resources.Spec{Name: "true", Properties: map[string]any{"environment": []string{"=x"}}}, "not KEY=VALUE"},
		{"provider", resources.Spec{Name: "true", Provider: "bash"}, `provider "bash"`},
		{"ensure absent", resources.Spec{Name: "true", Ensure: "absent"}, `ensure "absent"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.spec)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			err = r.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestNewRejectsBadProperties(t *testing.T) {
	t.Parallel()
	for _, props := range []map[string]any{
		{"comand": "x"},
		{"returns": "0"},
		{"refreshonly": "yes"},
	} {
		if _, err := New(resources.Spec{Name: "true", Properties: props}); err == nil {
			t.Errorf("New(%v): want an error", props)
		}
	}
}
