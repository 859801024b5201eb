package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// floorMode is the file mode every generated file asks for.
const floorMode fs.FileMode = 0o644

// floorPass does, in a plain loop in this process, the work a converging
// tool must do for spec: per file, lstat, read, compare content, mode and
// owner, and when they differ (and apply is set) write the content
// atomically (a temporary file in the same directory, chmod, chown, fsync,
// rename); then the exec's guard (stat of its marker; the marker is created
// without spawning a process). It returns how many resources changed.
func floorPass(spec filesSpec, uid, gid int, apply bool) (int, error) {
	changed := 0
	for i := range spec.n {
		path, want := spec.fileName(i), []byte(spec.content(i))
		differs, err := floorDiffers(path, want, uid, gid)
		if err != nil {
			return changed, err
		}
		if !differs {
			continue
		}
		changed++
		if apply {
			if err := atomicWrite(path, want, uid, gid); err != nil {
				return changed, err
			}
		}
	}
	if spec.exec {
		_, err := os.Stat(spec.markerPath())
		switch {
		case errors.Is(err, fs.ErrNotExist):
			changed++
			if apply {
				if err := atomicWrite(spec.markerPath(), nil, uid, gid); err != nil {
					return changed, err
				}
			}
		case err != nil:
			return changed, fmt.Errorf("floor: %w", err)
		}
	}
	return changed, nil
}

// floorDiffers reports whether the file at path is missing or differs in
// content, mode or owner from what is wanted.
func floorDiffers(path string, want []byte, uid, gid int) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("floor: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Mode().Perm() != floorMode || int(st.Uid) != uid || int(st.Gid) != gid {
		return true, nil
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("floor: %w", err)
	}
	return !bytes.Equal(got, want), nil
}

// atomicWrite replaces path with content, owner and mode in one rename.
func atomicWrite(path string, content []byte, uid, gid int) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("floor: write %s: %w", path, err)
		}
	}()
	if _, err = tmp.Write(content); err != nil {
		return err
	}
	if err = tmp.Chmod(floorMode); err != nil {
		return err
	}
	if uid != os.Geteuid() || gid != os.Getegid() {
		if err = tmp.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// floorRun measures the floor's scenarios on n files in dir, reps times
// each: first apply (every file written), converged, noop (check only) and
// a 3-file drift. Timing is in-process: no process start is included.
func floorRun(spec filesSpec, uid, gid, reps int) (map[Scenario]time.Duration, error) {
	out := map[Scenario]time.Duration{}
	type step struct {
		sc      Scenario
		prepare func() error
		apply   bool
		want    int
	}
	drifted := min(3, spec.n)
	steps := []step{
		{ScenarioFirst, func() error { return clean(spec.dir) }, true, spec.resources()},
		{ScenarioConverged, nil, true, 0},
		{ScenarioNoop, nil, false, 0},
		{ScenarioDrift, func() error { _, err := spec.drift(); return err }, true, drifted},
	}
	for _, st := range steps {
		var ds []time.Duration
		for range reps {
			if st.prepare != nil {
				if err := st.prepare(); err != nil {
					return nil, err
				}
			}
			start := time.Now()
			changed, err := floorPass(spec, uid, gid, st.apply)
			d := time.Since(start)
			if err != nil {
				return nil, err
			}
			if changed != st.want {
				return nil, fmt.Errorf("floor %s of %d files: %d changed, want %d", st.sc, spec.n, changed, st.want)
			}
			ds = append(ds, d)
		}
		out[st.sc] = median(ds)
	}
	return out, spec.verify()
}
