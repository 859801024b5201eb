package facts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shirou/gopsutil/v4/host"

	"github.com/manifold-run/manifold/internal/tmpdir"
)

// TestHostInfoAsGopsutilReadsIt: the host facts read through the etc view
// are gopsutil's own, on this host and on etc directories of other
// distributions (HOST_ETC).
func TestHostInfoAsGopsutilReadsIt(t *testing.T) {
	same := func(t *testing.T) {
		t.Helper()
		got, err := hostInfo(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want, err := host.InfoWithContext(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got.Platform != want.Platform || got.PlatformFamily != want.PlatformFamily || got.PlatformVersion != want.PlatformVersion ||
			got.HostID != want.HostID || got.Hostname != want.Hostname || got.KernelVersion != want.KernelVersion ||
			got.KernelArch != want.KernelArch || got.OS != want.OS {
			t.Fatalf("through the view: %+v\ngopsutil:          %+v", got, want)
		}
	}
	t.Run("this host", same)
	for name, files := range map[string]map[string]string{
		"debian": {"debian_version": "12.5\n", "os-release": "ID=debian\nVERSION_ID=\"12\"\n", "machine-id": "0123456789abcdef0123456789abcdef\n"},
		"alpine": {"alpine-release": "3.20.1\n"},
		"rhel":   {"redhat-release": "Rocky Linux release 9.4 (Blue Onyx)\n", "os-release": "ID=\"rocky\"\n"},
		"ubuntu": {"debian_version": "bookworm/sid\n", "lsb-release": "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=24.04\n"},
	} {
		t.Run(name, func(t *testing.T) {
			etc := t.TempDir()
			for f, content := range files {
				if err := os.WriteFile(filepath.Join(etc, f), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("HOST_ETC", etc)
			same(t)
		})
	}
}

// TestHostInfoViewOnTmpfsRemoved: where gopsutil would run lsb_release,
// the view of the etc directory is made in tmpdir.Base (TMPDIR here, a
// tmpfs without it) and removed once read.
func TestHostInfoViewOnTmpfsRemoved(t *testing.T) {
	if _, err := os.Stat(lsbReleaseProgram); err != nil {
		t.Skipf("no %s: no view is made", lsbReleaseProgram)
	}
	t.Setenv("HOST_ETC", t.TempDir()) // no lsb-release
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	before, _ := filepath.Glob(filepath.Join(tmpdir.Shm, "manifold-etc-*"))
	if _, err := hostInfo(t.Context()); err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
		t.Fatalf("TMPDIR holds %v (%v) after the facts", entries, err)
	}
	after, _ := filepath.Glob(filepath.Join(tmpdir.Shm, "manifold-etc-*"))
	if len(after) > len(before) {
		t.Fatalf("views left in %s: %v", tmpdir.Shm, after)
	}
}
