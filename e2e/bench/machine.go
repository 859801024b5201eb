package bench

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where the figures were taken.
type Machine struct {
	CPUs     int
	CPUModel string
	MemTotal string
	Kernel   string
	Go       string
	Commit   string
	// LoadAvg is /proc/loadavg when the harness started: other work on the
	// machine skews the figures.
	LoadAvg string
}

// describeMachine gathers the machine's description; what cannot be read
// is left empty.
func describeMachine(ctx context.Context, root string) Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	m.MemTotal = memTotal(procField("/proc/meminfo", "MemTotal"))
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	m.Go = commandLine(ctx, root, "go", "version")
	m.Commit = commandLine(ctx, root, "git", "rev-parse", "--short=12", "HEAD")
	if commandLine(ctx, root, "git", "status", "--porcelain", "--untracked-files=no") != "" {
		m.Commit += " (with uncommitted changes)"
	}
	return m
}

// memTotal turns /proc/meminfo's "24684084 kB" into "23.5 GiB".
func memTotal(v string) string {
	kb, ok := strings.CutSuffix(v, " kB")
	n, err := strconv.ParseFloat(kb, 64)
	if !ok || err != nil {
		return v
	}
	return strconv.FormatFloat(n/(1<<20), 'f', 1, 64) + " GiB"
}

// procField returns the value of the first "key: value" line of a /proc
// file.
func procField(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// commandLine runs a short command in dir and returns its trimmed output,
// "" when it fails.
func commandLine(ctx context.Context, dir, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
