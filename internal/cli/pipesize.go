package cli

import (
	"io"
	"os"
	"syscall"
)

// pipeBuffer is the pipe capacity a large write asks for: the most an
// unprivileged process may set (/proc/sys/fs/pipe-max-size's default).
const pipeBuffer = 1 << 20

// fSetPipeSize is fcntl's F_SETPIPE_SZ (Linux).
const fSetPipeSize = 1031

// widenPipe asks for a pipe buffer of up to pipeBuffer bytes when w is a
// pipe and n bytes are about to be written to it: through the default
// 64 KiB, a 20,000-resource report (7.7 MB indented) waited some 120
// times for its reader to be scheduled. A failure (a pipe-size limit)
// changes nothing: the write goes through the pipe as it is.
func widenPipe(w io.Writer, n int) {
	f, ok := w.(*os.File)
	if !ok || n <= 64<<10 {
		return
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) {
			_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, uintptr(min(n, pipeBuffer)))
		})
	}
}
