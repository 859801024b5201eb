package facts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shirou/gopsutil/v4/host"
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
