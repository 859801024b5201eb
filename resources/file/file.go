package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// Type is the resource type name the file type registers under.
const Type = "file"

// Ensure is the desired state of a file resource.
type Ensure string

const (
	// EnsurePresent wants a regular file (the default).
	EnsurePresent Ensure = "present"
	// EnsureAbsent wants nothing at the path (an empty directory is removed
	// too; a non-empty one is an error).
	EnsureAbsent Ensure = "absent"
	// EnsureDirectory wants a directory.
	EnsureDirectory Ensure = "directory"
)

// Properties are the file type's own properties.
type Properties struct {
	// Content is the desired content; nil means unmanaged (unless Source).
	Content *string `json:"content,omitempty"`
	// Source is a file whose content is copied; relative paths resolve
	// against Env.WorkDir.
	Source string `json:"source,omitempty"`
	// Mode is an octal string ("0644"); empty means unmanaged.
	Mode string `json:"mode,omitempty"`
	// Owner is a user name or numeric uid; empty means unmanaged.
	Owner string `json:"owner,omitempty"`
	// Group is a group name or numeric gid; empty means unmanaged.
	Group string `json:"group,omitempty"`
}

// File is one file resource.
type File struct {
	// Path is the absolute path (the resource's name).
	Path string
	// Ensure is the desired state; empty means EnsurePresent.
	Ensure Ensure
	Properties
}

var _ resources.Resource = (*File)(nil)

// New is the file type's resources.Factory: it decodes spec's properties.
func New(spec resources.Spec) (resources.Resource, error) {
	f := &File{Path: spec.Name, Ensure: Ensure(spec.Ensure)}
	if err := resources.DecodeProperties(spec.Properties, &f.Properties); err != nil {
		return nil, err
	}
	return f, nil
}

// Validate checks the properties without touching the system.
func (f *File) Validate() error {
	if !filepath.IsAbs(f.Path) {
		return fmt.Errorf("name %q: must be an absolute path", f.Path)
	}
	if filepath.Clean(f.Path) == "/" {
		return errors.New(`name "/": refusing to manage the root directory`)
	}
	switch f.ensure() {
	case EnsurePresent:
		if f.Content != nil && f.Source != "" {
			return errors.New("content and source are mutually exclusive")
		}
	case EnsureAbsent, EnsureDirectory:
		if f.Content != nil || f.Source != "" {
			return fmt.Errorf("ensure %s: content and source apply only to ensure present", f.ensure())
		}
	default:
		return fmt.Errorf("ensure %q: must be present, absent or directory", f.Ensure)
	}
	if _, _, err := parseMode(f.Mode); err != nil {
		return err
	}
	return nil
}

func (f *File) ensure() Ensure {
	if f.Ensure == "" {
		return EnsurePresent
	}
	return f.Ensure
}

// CheckApply reports how the path differs from the desired state and, when
// apply is true, converges it.
func (f *File) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if err := ctx.Err(); err != nil {
		return resources.Result{}, err
	}
	switch f.ensure() {
	case EnsureAbsent:
		return f.absent(apply)
	case EnsureDirectory:
		return f.directory(apply)
	default:
		return f.present(env, apply)
	}
}

func (f *File) present(env *resources.Env, apply bool) (resources.Result, error) {
	want, err := f.wantMeta()
	if err != nil {
		return resources.Result{}, err
	}
	var content []byte
	manageContent := f.Content != nil || f.Source != ""
	switch {
	case f.Content != nil:
		content = []byte(*f.Content)
	case f.Source != "":
		src := f.Source
		if !filepath.IsAbs(src) && env != nil && env.WorkDir != "" {
			src = filepath.Join(env.WorkDir, src)
		}
		if content, err = os.ReadFile(src); err != nil {
			return resources.Result{}, fmt.Errorf("source: %w", err)
		}
	}

	target, fi, err := resolve(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := parentExists(f.Path); err != nil {
			return resources.Result{}, err
		}
		res := resources.Result{Changed: true, Message: verb(apply, "create", "created")}
		if manageContent {
			res.Diff = contentDiff(f.Path, nil, content)
		}
		if !apply {
			return res, nil
		}
		return res, writeAtomic(f.Path, content, want.perm(0o644), want.uid, want.gid)
	}
	if err != nil {
		return resources.Result{}, err
	}
	if fi.IsDir() {
		return resources.Result{}, fmt.Errorf("%s is a directory, want a file", f.Path)
	}
	if !fi.Mode().IsRegular() {
		return resources.Result{}, fmt.Errorf("%s is not a regular file (%s)", f.Path, fi.Mode().Type())
	}

	var (
		changes []string
		diff    string
	)
	contentDiffers := false
	if manageContent {
		current, err := os.ReadFile(target)
		if err != nil {
			return resources.Result{}, err
		}
		if contentDiffers = string(current) != string(content); contentDiffers {
			changes = append(changes, verb(apply, "update content", "updated content"))
			diff = contentDiff(f.Path, current, content)
		}
	}
	have := metaOf(fi)
	metaChanges := want.differences(have)
	changes = append(changes, metaChanges...)
	if len(changes) == 0 {
		return resources.Result{}, nil
	}
	res := resources.Result{Changed: true, Message: strings.Join(changes, ", "), Diff: diff}
	if !apply {
		return res, nil
	}
	if contentDiffers {
		uid, gid := want.uid, want.gid
		if uid < 0 {
			uid = have.uid
		}
		if gid < 0 {
			gid = have.gid
		}
		return res, writeAtomic(target, content, want.perm(have.mode), uid, gid)
	}
	return res, want.applyTo(target, have)
}

func (f *File) directory(apply bool) (resources.Result, error) {
	want, err := f.wantMeta()
	if err != nil {
		return resources.Result{}, err
	}
	fi, err := os.Lstat(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := parentExists(f.Path); err != nil {
			return resources.Result{}, err
		}
		res := resources.Result{Changed: true, Message: verb(apply, "create directory", "created directory")}
		if !apply {
			return res, nil
		}
		if err := os.Mkdir(f.Path, 0o700); err != nil {
			return resources.Result{}, err
		}
		// Mkdir's mode passes through the umask; set it (and ownership)
		// explicitly, as for any existing directory.
		fi, err := os.Lstat(f.Path)
		if err != nil {
			return resources.Result{}, err
		}
		want.mode, want.modeSet = want.perm(0o755), true
		return res, want.applyTo(f.Path, metaOf(fi))
	}
	if err != nil {
		return resources.Result{}, err
	}
	if !fi.IsDir() {
		return resources.Result{}, fmt.Errorf("%s exists and is not a directory (%s)", f.Path, typeName(fi))
	}
	have := metaOf(fi)
	changes := want.differences(have)
	if len(changes) == 0 {
		return resources.Result{}, nil
	}
	res := resources.Result{Changed: true, Message: strings.Join(changes, ", ")}
	if !apply {
		return res, nil
	}
	return res, want.applyTo(f.Path, have)
}

func (f *File) absent(apply bool) (resources.Result, error) {
	fi, err := os.Lstat(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return resources.Result{}, nil
	}
	if err != nil {
		return resources.Result{}, err
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(f.Path)
		if err != nil {
			return resources.Result{}, err
		}
		if len(entries) > 0 {
			return resources.Result{}, fmt.Errorf("refusing to remove non-empty directory %s", f.Path)
		}
	}
	res := resources.Result{Changed: true, Message: verb(apply, "remove "+typeName(fi), "removed "+typeName(fi))}
	if !apply {
		return res, nil
	}
	return res, os.Remove(f.Path)
}

// resolve follows a symlink at path so content is written to its target,
// keeping the link. It returns the path to operate on and its info.
func resolve(path string) (string, fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return path, fi, err
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, fmt.Errorf("%s is a dangling symlink: %w", path, err)
	}
	fi, err = os.Stat(target)
	return target, fi, err
}

func parentExists(path string) error {
	parent := filepath.Dir(path)
	fi, err := os.Stat(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("parent directory %s does not exist", parent)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("parent %s is not a directory", parent)
	}
	return nil
}

func typeName(fi fs.FileInfo) string {
	switch {
	case fi.IsDir():
		return "directory"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "symlink"
	case fi.Mode().IsRegular():
		return "file"
	default:
		return fi.Mode().Type().String()
	}
}

// verb picks the check-time (verb phrase, read as "would ...") or apply-time
// wording of a change.
func verb(apply bool, check, applied string) string {
	if apply {
		return applied
	}
	return check
}

// parseMode parses an octal mode string; ok is false when s is empty.
func parseMode(s string) (mode os.FileMode, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0o"), 8, 32)
	if err != nil || n > 0o7777 {
		return 0, false, fmt.Errorf("mode %q: want an octal mode such as \"0644\"", s)
	}
	return unixToFileMode(uint32(n)), true, nil
}
