package facts

import (
	"cmp"
	"context"
	"os"
	"path/filepath"

	"github.com/shirou/gopsutil/v4/common"
	"github.com/shirou/gopsutil/v4/host"

	"github.com/manifold-run/manifold/internal/tmpdir"
)

// hostInfo is gopsutil's host.InfoWithContext, without the one program it
// runs. Where <etc>/lsb-release is absent and /usr/bin/lsb_release exists
// (Debian, for one), gopsutil runs `lsb_release` with no option to read
// the distribution's ID and release from its output. Without an option
// lsb_release prints only the LSB version (or nothing), never those
// fields, so the program changes no fact: it only costs a process (7 ms,
// the longest part of gathering facts). Here gopsutil reads its files
// through a view of the etc directory that holds an empty lsb-release and
// symbolic links to the real files it reads, so it finds the same empty
// fields without running anything. The view is made in tmpdir.Base (a
// tmpfs unless TMPDIR is set): 5 entries made and removed.
func hostInfo(ctx context.Context) (*host.InfoStat, error) {
	etc := cmp.Or(os.Getenv("HOST_ETC"), "/etc")
	if _, err := os.Stat(filepath.Join(etc, "lsb-release")); err == nil {
		return host.InfoWithContext(ctx) // read as is: no program runs
	}
	if _, err := os.Stat(lsbReleaseProgram); err != nil {
		return host.InfoWithContext(ctx)
	}
	view, err := os.MkdirTemp(tmpdir.Base(), "manifold-etc-")
	if err != nil {
		return host.InfoWithContext(ctx)
	}
	defer os.RemoveAll(view)
	if err := os.WriteFile(filepath.Join(view, "lsb-release"), nil, 0o600); err != nil {
		return host.InfoWithContext(ctx)
	}
	for _, name := range etcFilesRead {
		p := filepath.Join(etc, name)
		if _, err := os.Lstat(p); err == nil {
			if err := os.Symlink(p, filepath.Join(view, name)); err != nil {
				return host.InfoWithContext(ctx)
			}
		}
	}
	env, _ := ctx.Value(common.EnvKey).(common.EnvMap)
	withView := common.EnvMap{common.HostEtcEnvKey: view}
	for k, v := range env {
		if k != common.HostEtcEnvKey {
			withView[k] = v
		}
	}
	return host.InfoWithContext(context.WithValue(ctx, common.EnvKey, withView))
}

// lsbReleaseProgram is the program gopsutil runs when lsb-release is
// absent.
const lsbReleaseProgram = "/usr/bin/lsb_release"

// etcFilesRead are the files of the etc directory gopsutil's host info
// reads (host/host_linux.go and internal/common/common_linux.go of
// gopsutil v4), lsb-release aside.
var etcFilesRead = []string{
	"machine-id", "os-release", "debian_version", "oracle-release", "enterprise-release", "slackware-version",
	"neokylin-release", "redhat-release", "system-release", "gentoo-release", "SuSE-release", "arch-release",
	"alpine-release",
}
