package converge

import "errors"

// ErrWatchLimit means a watch could not be added because the kernel's
// limit (fs.inotify.max_user_watches) is reached: the resources concerned
// are covered by interval checks only.
var ErrWatchLimit = errors.New("converge: inotify watch limit reached (raise fs.inotify.max_user_watches); falling back to interval checks")
