package pkg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// member is one package of a batch test: name and ensure.
type member struct{ name, ensure string }

// runBatch executes pkgs as one resources.Batch on runner, as the worker
// does with consecutive packages of one batch key, and returns their
// outcomes. It fails the test when the keys differ.
func runBatch(t *testing.T, runner *resources.ReplayRunner, noop bool, pkgs ...member) []resources.Outcome {
	t.Helper()
	ctx := context.Background()
	env := &resources.Env{Runner: runner, Noop: noop}
	var (
		b   resources.Batch
		key string
	)
	for i, m := range pkgs {
		p := newPackage(t, m.name, m.ensure, "").(*Package)
		k, err := p.BatchKey(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && k != key {
			t.Fatalf("%s has batch key %q, the batch %q", m.name, k, key)
		}
		key = k
		b.Check(ctx, p, env)
	}
	_ = b.Apply(ctx) // its error is the batch's; each outcome says what happened
	outs := make([]resources.Outcome, len(pkgs))
	for i := range pkgs {
		outs[i] = b.Finish(ctx, i)
	}
	if err := runner.Verify(); err != nil {
		t.Error(err)
	}
	return outs
}

// managerCalls returns the argv of the install and remove commands run.
func managerCalls(r *resources.ReplayRunner) [][]string {
	var out [][]string
	for _, c := range r.Calls() {
		if c.Argv[0] == "apt-get" || c.Argv[0] == "dnf" && c.Argv[1] == "-y" {
			out = append(out, c.Argv)
		}
	}
	return out
}

func requireOutcomes(t *testing.T, outs []resources.Outcome, want ...string) {
	t.Helper()
	var got []string
	for _, o := range outs {
		got = append(got, string(o.Status)+": "+o.Message)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outcomes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// absent, installed: dpkg-query answers recorded for hello, sl and tree.
func absent(t *testing.T, name string) resources.ReplayStep {
	return step(t, 1, "", "apt/dpkg-query-"+name+"-absent.stderr", dq(name)...)
}

func installed(t *testing.T, name string) resources.ReplayStep {
	return step(t, 0, "apt/dpkg-query-"+name+"-installed.stdout", "", dq(name)...)
}

// TestBatchInstallsInOneTransaction: three packages to install are checked
// one by one, installed by one apt-get install naming all three, and
// re-checked one by one, each with its own changed outcome.
func TestBatchInstallsInOneTransaction(t *testing.T) {
	t.Parallel()
	var steps []resources.ReplayStep
	for _, n := range []string{"sl", "hello", "tree"} {
		// check, then the batch's read under the lock, then the re-check
		steps = append(steps, absent(t, n), absent(t, n), installed(t, n))
	}
	steps = append(steps, step(t, 0, "apt/apt-get-install-sl-hello-tree.stdout", "apt/apt-get-install-sl-hello-tree.stderr",
		cat(aptOpts, "install", "sl", "hello", "tree")...))
	runner := aptHost(steps...)
	outs := runBatch(t, runner, false, member{"sl", "present"}, member{"hello", ""}, member{"tree", "present"})
	requireOutcomes(t, outs, "changed: installed", "changed: installed", "changed: installed")
	if got := managerCalls(runner); len(got) != 1 {
		t.Fatalf("package-manager commands %q, want one", got)
	}
	for _, c := range runner.Calls() {
		if c.Argv[0] == "apt-get" && !slices.Contains(c.Env, "DEBIAN_FRONTEND=noninteractive") {
			t.Errorf("%v ran without DEBIAN_FRONTEND=noninteractive", c.Argv)
		}
	}
}

// TestBatchInstallsOnlyTheMissing: an installed package of the batch is
// stable and not named in the transaction.
func TestBatchInstallsOnlyTheMissing(t *testing.T) {
	t.Parallel()
	runner := aptHost(
		absent(t, "sl"), absent(t, "sl"), installed(t, "sl"),
		installed(t, "hello"),
		absent(t, "tree"), absent(t, "tree"), installed(t, "tree"),
		step(t, 0, "apt/apt-get-install-sl-tree.stdout", "apt/apt-get-install-sl-tree.stderr", cat(aptOpts, "install", "sl", "tree")...),
	)
	outs := runBatch(t, runner, false, member{"sl", "present"}, member{"hello", "present"}, member{"tree", "present"})
	requireOutcomes(t, outs, "changed: installed", "stable: installed 2.10-3", "changed: installed")
	if outs[1].Changed {
		t.Fatal("the installed package is reported changed")
	}
}

// TestBatchPinnedVersion: a pinned version is named name=version in the
// transaction, which then allows downgrades.
func TestBatchPinnedVersion(t *testing.T) {
	t.Parallel()
	runner := aptHost(
		absent(t, "sl"), absent(t, "sl"), installed(t, "sl"),
		absent(t, "hello"), absent(t, "hello"), installed(t, "hello"),
		absent(t, "tree"), absent(t, "tree"), installed(t, "tree"),
		step(t, 0, "apt/apt-get-install-sl-version-hello-tree.stdout", "apt/apt-get-install-sl-version-hello-tree.stderr",
			cat(aptOpts, "--allow-downgrades", "install", "sl=5.02-1+b1", "hello", "tree")...),
	)
	outs := runBatch(t, runner, false, member{"sl", "5.02-1+b1"}, member{"hello", "present"}, member{"tree", "present"})
	requireOutcomes(t, outs, "changed: installed 5.02-1+b1", "changed: installed", "changed: installed")
	if outs[0].Diff != "version: absent → 5.02-1+b1\n" {
		t.Fatalf("diff %q", outs[0].Diff)
	}
}

// TestBatchFailureFallsBackPerPackage: apt refuses the whole transaction
// for one unknown package; each package is then installed alone, and only
// the unknown one fails, with apt's reason.
func TestBatchFailureFallsBackPerPackage(t *testing.T) {
	t.Parallel()
	const bad = "manifold-no-such-pkg"
	unknown := step(t, 1, "", "apt/dpkg-query-unknown.stderr", dq(bad)...)
	runner := aptHost(
		// checks and the batch's reads
		absent(t, "hello"), absent(t, "hello"), unknown, unknown, absent(t, "tree"), absent(t, "tree"),
		step(t, 100, "apt/apt-get-install-hello-unknown-tree.stdout", "apt/apt-get-install-hello-unknown-tree.stderr",
			cat(aptOpts, "install", "hello", bad, "tree")...),
		// each alone: read, install, re-check
		absent(t, "hello"),
		step(t, 0, "apt/apt-get-install-hello.stdout", "apt/apt-get-install-hello.stderr", cat(aptOpts, "install", "hello")...),
		installed(t, "hello"),
		unknown,
		step(t, 100, "apt/apt-get-install-unknown.stdout", "apt/apt-get-install-unknown.stderr", cat(aptOpts, "install", bad)...),
		absent(t, "tree"),
		step(t, 0, "apt/apt-get-install-tree.stdout", "apt/apt-get-install-tree.stderr", cat(aptOpts, "install", "tree")...),
		installed(t, "tree"),
	)
	outs := runBatch(t, runner, false, member{"hello", "present"}, member{bad, "present"}, member{"tree", "present"})
	if outs[0].Status != resources.StatusChanged || outs[2].Status != resources.StatusChanged {
		t.Fatalf("the good packages: %+v / %+v", outs[0], outs[2])
	}
	if outs[1].Status != resources.StatusFailed || !errors.Is(outs[1].Err, ErrCommandFailed) ||
		!strings.Contains(outs[1].Err.Error(), "install "+bad+" exited 100: E: Unable to locate package "+bad) {
		t.Fatalf("the bad package: %+v", outs[1])
	}
	want := [][]string{
		cat(aptOpts, "install", "hello", bad, "tree"),
		cat(aptOpts, "install", "hello"), cat(aptOpts, "install", bad), cat(aptOpts, "install", "tree"),
	}
	if got := managerCalls(runner); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("commands\n%q\nwant\n%q", got, want)
	}
}

// TestBatchNoopNeverInstalls: in noop only the queries run.
func TestBatchNoopNeverInstalls(t *testing.T) {
	t.Parallel()
	runner := aptHost(absent(t, "sl"), installed(t, "hello"), absent(t, "tree"))
	outs := runBatch(t, runner, true, member{"sl", "present"}, member{"hello", "present"}, member{"tree", "present"})
	requireOutcomes(t, outs, "changed: would install", "stable: installed 2.10-3", "changed: would install")
	if got := managerCalls(runner); len(got) != 0 {
		t.Fatalf("noop ran %q", got)
	}
}

// TestBatchRemovesInOneTransaction: absent packages form their own
// batches, removed by one apt-get remove.
func TestBatchRemovesInOneTransaction(t *testing.T) {
	t.Parallel()
	var steps []resources.ReplayStep
	for _, n := range []string{"sl", "hello", "tree"} {
		steps = append(steps, installed(t, n), installed(t, n), absent(t, n))
	}
	steps = append(steps, step(t, 0, "apt/apt-get-remove-sl-hello-tree.stdout", "", cat(aptRm, "sl", "hello", "tree")...))
	runner := aptHost(steps...)
	outs := runBatch(t, runner, false, member{"sl", "absent"}, member{"hello", "absent"}, member{"tree", "absent"})
	requireOutcomes(t, outs, "changed: removed 5.02-1+b1", "changed: removed 2.10-3", "changed: removed 2.1.0-1")
	if got := managerCalls(runner); len(got) != 1 {
		t.Fatalf("commands %q, want one", got)
	}
}

// TestBatchDNF: dnf installs and upgrades in one dnf install (name-version
// for a version), and runs downgrades as their own dnf downgrade.
func TestBatchDNF(t *testing.T) {
	t.Parallel()
	tcshAbsent := step(t, 1, "dnf/rpm-q-tcsh-absent.stdout", "", rpmq("tcsh")...)
	zsh := step(t, 0, "dnf/rpm-q-zsh.stdout", "", rpmq("zsh")...)
	t.Run("install and upgrade", func(t *testing.T) {
		t.Parallel()
		runner := dnfHost(
			tcshAbsent, tcshAbsent, step(t, 0, "dnf/rpm-q-tcsh.stdout", "", rpmq("tcsh")...),
			zsh, zsh, step(t, 0, "dnf/rpm-q-zsh-upgraded.stdout", "", rpmq("zsh")...),
			step(t, 0, "dnf/dnf-install-tcsh-zsh.stdout", "", "dnf", "-y", "install", "tcsh", "zsh-5.8-9.el9_5"),
		)
		outs := runBatch(t, runner, false, member{"tcsh", "present"}, member{"zsh", "5.8-9.el9_5"})
		requireOutcomes(t, outs, "changed: installed", "changed: upgraded 5.8-9.el9 to 5.8-9.el9_5")
	})
	t.Run("install and downgrade", func(t *testing.T) {
		t.Parallel()
		runner := dnfHost(
			tcshAbsent, tcshAbsent, step(t, 0, "dnf/rpm-q-tcsh.stdout", "", rpmq("tcsh")...),
			zsh, zsh, resources.ReplayStep{Argv: rpmq("zsh"), Stdout: "zsh 0 5.6 1.el9 x86_64\n"},
			step(t, 0, "dnf/dnf-install-tcsh.stdout", "", "dnf", "-y", "install", "tcsh"),
			resources.ReplayStep{Argv: []string{"dnf", "-y", "downgrade", "zsh-5.6-1.el9"}},
		)
		outs := runBatch(t, runner, false, member{"tcsh", "present"}, member{"zsh", "5.6-1.el9"})
		requireOutcomes(t, outs, "changed: installed", "changed: downgraded 5.8-9.el9 to 5.6-1.el9")
		want := [][]string{{"dnf", "-y", "install", "tcsh"}, {"dnf", "-y", "downgrade", "zsh-5.6-1.el9"}}
		if got := managerCalls(runner); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("commands %q, want %q", got, want)
		}
	})
}

// TestBatchKey: the key is the provider chosen for the host and the
// operation, so a forced provider equal to the chosen one batches with an
// unforced one, and installs, removes and other providers do not mix.
func TestBatchKey(t *testing.T) {
	t.Parallel()
	both := resources.NewReplayRunner()
	both.SetPrograms("apt-get", "apt-cache", "dpkg-query", "dnf", "rpm")
	env := &resources.Env{Runner: both}
	tests := []struct{ ensure, provider, key string }{
		{"present", "", "apt install"},
		{"present", "apt", "apt install"},
		{"latest", "", "apt install"},
		{"1.2-3", "", "apt install"},
		{"absent", "", "apt remove"},
		{"present", "dnf", "dnf install"},
		{"absent", "dnf", "dnf remove"},
	}
	for _, tt := range tests {
		key, err := newPackage(t, "sl", tt.ensure, tt.provider).(*Package).BatchKey(context.Background(), env)
		if err != nil || key != tt.key {
			t.Errorf("ensure %q provider %q: key %q (%v), want %q", tt.ensure, tt.provider, key, err, tt.key)
		}
	}
	if _, err := newPackage(t, "sl", "present", "dnf").(*Package).BatchKey(context.Background(), &resources.Env{Runner: aptHost()}); !errors.Is(err, resources.ErrProviderNotManageable) {
		t.Fatalf("a forced provider the host lacks: %v", err)
	}
}
