package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
)

// Type is the resource type name the file type registers under.
const Type = "file"

// Ensure is the desired state of a file resource.
type Ensure string

const (
	// EnsurePresent wants a regular file (the default).
	EnsurePresent Ensure = "present"
	// EnsureAbsent wants nothing at the path (an empty directory is removed
	// too; a non-empty one only with force).
	EnsureAbsent Ensure = "absent"
	// EnsureDirectory wants a directory.
	EnsureDirectory Ensure = "directory"
)

// Links says what happens when the managed path is a symbolic link.
type Links string

const (
	// LinksManage (the default) manages the path itself: a link there is
	// replaced by the file (content) or refused (attribute-only, directory),
	// and nothing is ever written, chowned or chmodded through it.
	LinksManage Links = "manage"
	// LinksFollow manages the file or directory the link points to; the
	// link is kept.
	LinksFollow Links = "follow"
)

// ID is a user or group: a name, or a numeric id written as a string or as
// a number.
type ID string

// UnmarshalJSON accepts a string or a non-negative integer.
func (id *ID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*id = ID(s)
		return nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		return &json.UnmarshalTypeError{Value: "value " + string(b), Type: idType}
	}
	if _, err := strconv.ParseUint(n.String(), 10, 32); err != nil {
		return &json.UnmarshalTypeError{Value: "number " + n.String(), Type: idType}
	}
	*id = ID(n.String())
	return nil
}

// idType is what a type error about an ID reports as expected.
var idType = reflect.TypeFor[string]()

// Properties are the file type's own properties.
type Properties struct {
	// Content is the desired content; nil means unmanaged (unless Source).
	Content *string `json:"content,omitempty"`
	// Source is a file whose content is copied: relative to Env.WorkDir (the
	// manifest's directory), or absolute but inside it; never outside.
	Source string `json:"source,omitempty"`
	// Mode is an octal string ("0644"); empty means unmanaged.
	Mode string `json:"mode,omitempty"`
	// Owner is a user name or numeric uid; empty means unmanaged.
	Owner ID `json:"owner,omitempty"`
	// Group is a group name or numeric gid; empty means unmanaged.
	Group ID `json:"group,omitempty"`
	// Force lets ensure absent remove a non-empty directory.
	Force bool `json:"force,omitempty"`
	// Links is manage (default) or follow; see Links.
	Links Links `json:"links,omitempty"`
	// ShowDiff: nil shows content diffs only of world-readable files; true
	// shows them always; false never.
	ShowDiff *bool `json:"show_diff,omitempty"`
	// Sensitive redacts the content from diffs: only sizes are reported.
	Sensitive bool `json:"sensitive,omitempty"`
}

// File is one file resource.
type File struct {
	// Path is the absolute path (the resource's name).
	Path string
	// Ensure is the desired state; empty means EnsurePresent.
	Ensure Ensure
	Properties

	// drifted is what the last check that found the file's content or
	// metadata changed saw (see checkedFile): the apply that follows
	// reuses its verdict while the file is unchanged since.
	drifted atomic.Pointer[checkedFile]
	// written is the fstat of the file the last write of Content put at
	// Path, taken once renamed there (see safefs.Group.AddStat; zero until
	// the group's commit, and when it failed): the next check (the
	// engine's re-check) takes the content as right, without reading it,
	// while an lstat shows that very file unchanged (sameFile).
	written atomic.Pointer[syscall.Stat_t]
}

// checkedFile is a regular file as a check saw it: its identity and
// change times, and whether its content differed from the desired one.
// While an lstat gives the same device, inode, size, mode, owner and
// modification and change times, its content is the one the check read
// (any write, truncation, chmod, chown or replacement changes one of
// them; since Linux 6.13 ext4, xfs, btrfs and tmpfs give a change right
// after a read of the times a fine-grained one, so not even a write in
// the same clock tick is missed), so the apply after the check need not
// read and compare it again, nor diff it: the engine reports the check's
// diff. Whatever it finds, an apply writes the desired content when the
// check found it differing, so a stale verdict can never leave a wrong
// file reported right. The engine's re-check reads the file back, unless
// it is the very file the apply wrote, unchanged since (File.written).
type checkedFile struct {
	st      syscall.Stat_t
	differs bool
}

// sameFile reports whether a and b describe the same, unchanged file.
func sameFile(a, b *syscall.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mode == b.Mode &&
		a.Uid == b.Uid && a.Gid == b.Gid && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// checkReads counts the contents the file type read to compare them
// (tests).
var checkReads atomic.Int64

// writtenChecks counts the checks that took a file's content as right
// because it was the file written last, unchanged since (tests).
var writtenChecks atomic.Int64

var _ resources.Resource = (*File)(nil)

// New is the file type's resources.Factory: it decodes spec's properties.
func New(spec resources.Spec) (resources.Resource, error) {
	f := &File{Path: spec.Name, Ensure: Ensure(spec.Ensure)}
	if decodeDirect(spec.Properties, &f.Properties) {
		return f, nil
	}
	f.Properties = Properties{}
	if err := resources.DecodeProperties(spec.Properties, &f.Properties); err != nil {
		return nil, err
	}
	return f, nil
}

// decodeDirect decodes props into p without the JSON round trip of
// resources.DecodeProperties (a worker builds every resource of a run),
// when every property is known and of its plain Go type (strings, bools;
// owner and group as strings). It reports false otherwise, and
// DecodeProperties, which gives the precise error or converts numbers,
// decodes them instead.
func decodeDirect(props map[string]any, p *Properties) bool {
	for k, v := range props {
		switch k {
		case "content":
			s, ok := v.(string)
			if !ok {
				return false
			}
			p.Content = &s
		case "source", "mode", "owner", "group", "links":
			s, ok := v.(string)
			if !ok {
				return false
			}
			switch k {
			case "source":
				p.Source = s
			case "mode":
				p.Mode = s
			case "owner":
				p.Owner = ID(s)
			case "group":
				p.Group = ID(s)
			default:
				p.Links = Links(s)
			}
		case "force", "sensitive", "show_diff":
			b, ok := v.(bool)
			if !ok {
				return false
			}
			switch k {
			case "force":
				p.Force = b
			case "sensitive":
				p.Sensitive = b
			default:
				p.ShowDiff = &b
			}
		default:
			return false
		}
	}
	return true
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
	if f.Force && f.ensure() != EnsureAbsent {
		return fmt.Errorf("force: only valid with ensure absent, not %s", f.ensure())
	}
	switch f.Links {
	case "", LinksManage, LinksFollow:
	default:
		return fmt.Errorf("links %q: must be manage or follow", f.Links)
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

func (f *File) follow() bool { return f.Links == LinksFollow }

// CheckApply reports how the path differs from the desired state and, when
// apply is true, converges it.
func (f *File) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	return f.checkApply(ctx, env, apply, nil)
}

// checkApply is CheckApply; with stage set, a content write is added to
// it rather than done (see ApplyBatch).
func (f *File) checkApply(ctx context.Context, env *resources.Env, apply bool, stage *safefs.Group) (resources.Result, error) {
	if err := ctx.Err(); err != nil {
		return resources.Result{}, err
	}
	// The parent is walked from "/" first (once per directory of a
	// segment, see safefs.Dirs): a symlink on the way that its owner could
	// point anywhere fails the resource, in noop too. Everything after is
	// relative to its descriptor.
	d, name, err := openParent(ctx, f.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && f.ensure() == EnsureAbsent {
			return resources.Result{}, nil
		}
		if _, ok := env.Assumed().Dir(filepath.Dir(f.Path)); ok && errors.Is(err, fs.ErrNotExist) && !apply {
			return f.wouldCreate(ctx, env)
		}
		return resources.Result{}, err
	}
	defer d.Close()
	switch f.ensure() {
	case EnsureAbsent:
		return f.absent(d, name, apply)
	case EnsureDirectory:
		return f.directory(ctx, d, name, env, apply)
	default:
		return f.present(ctx, d, name, env, apply, stage)
	}
}

// write replaces name in d with data: at once, or staged in stage.
// When name in d is f.Path and data is f's Content, the written file's
// fstat is kept in f.written for the next check.
func (f *File) write(d *safefs.Dir, name, target string, data []byte, mode os.FileMode, uid, gid int, stage *safefs.Group) error {
	var st *syscall.Stat_t
	if target == f.Path && f.Content != nil && f.Source == "" {
		st = new(syscall.Stat_t)
		f.written.Store(st)
	}
	if stage != nil {
		return stage.AddStat(d, name, data, mode, uid, gid, st)
	}
	return d.WriteFileStat(name, data, mode, uid, gid, st)
}

// unchangedSinceWrite reports whether st (an lstat of f.Path) is the file
// f's last write of its Content put there, unchanged since.
func unchangedSinceWrite(written, st *syscall.Stat_t) bool {
	return written != nil && st != nil && written.Ino != 0 && sameFile(written, st)
}

func (f *File) present(ctx context.Context, d *safefs.Dir, name string, env *resources.Env, apply bool, stage *safefs.Group) (resources.Result, error) {
	written := f.written.Swap(nil) // one check's verdict at most
	want, err := f.wantMetaIn(ctx, env)
	if err != nil {
		return resources.Result{}, err
	}
	var content []byte
	manageContent := f.Content != nil || f.Source != ""
	switch {
	case f.Content != nil:
		content = []byte(*f.Content)
	case f.Source != "":
		root, workDir := "", ""
		if env != nil {
			root, workDir = env.Root, env.WorkDir
		}
		if content, err = readSource(root, workDir, f.Source); err != nil {
			return resources.Result{}, fmt.Errorf("source %s: %w", f.Source, err)
		}
	}

	fi, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		res := resources.Result{Changed: true, Message: verb(apply, "create", "created")}
		if manageContent {
			res.Diff = f.diff(ctx, f.Path, false, 0, nil, content, want.perm(0o644))
		}
		if !apply {
			return res, nil
		}
		return res, f.write(d, name, f.Path, content, want.perm(0o644), want.uid, want.gid, stage)
	}
	if err != nil {
		return resources.Result{}, err
	}
	target, td, tname := f.Path, d, name
	if fi.Mode()&fs.ModeSymlink != 0 {
		if !f.follow() {
			return f.replaceLink(ctx, d, name, content, manageContent, want, apply, stage)
		}
		if target, fi, err = resolve(f.Path); err != nil {
			return resources.Result{}, err
		}
		if td, tname, err = openParent(ctx, target); err != nil {
			return resources.Result{}, err
		}
		defer td.Close()
	}
	if fi.IsDir() {
		return resources.Result{}, fmt.Errorf("%s is a directory, want a file", target)
	}
	if !fi.Mode().IsRegular() {
		return resources.Result{}, fmt.Errorf("%s is not a regular file (%s)", target, fi.Mode().Type())
	}

	var (
		changes []string
		diff    string
	)
	have := metaOf(fi)
	contentDiffers := false
	st, _ := fi.Sys().(*syscall.Stat_t)
	if manageContent {
		if target == f.Path && f.Source == "" && unchangedSinceWrite(written, st) {
			// The very file this resource's last write put here, with
			// its Content, unchanged since: it holds Content.
			writtenChecks.Add(1)
		} else if seen := f.drifted.Load(); apply && st != nil && target == f.Path && seen != nil && sameFile(&seen.st, st) {
			// Unchanged since the check that found it drifted: its verdict
			// holds, its diff is the one reported.
			contentDiffers = seen.differs
		} else {
			current, err := readNoFollow(td, tname, fi)
			if err != nil {
				return resources.Result{}, err
			}
			checkReads.Add(1)
			if contentDiffers = !bytes.Equal(current, content); contentDiffers {
				diff = f.diff(ctx, target, true, fi.Mode(), current, content, want.perm(have.mode))
			}
		}
		if contentDiffers {
			changes = append(changes, verb(apply, "update content", "updated content"))
		}
	}
	metaChanges := want.differences(have)
	changes = append(changes, metaChanges...)
	f.drifted.Store(nil)
	if len(changes) == 0 {
		return resources.Result{}, nil
	}
	res := resources.Result{Changed: true, Message: strings.Join(changes, ", "), Diff: diff}
	if !apply {
		if st != nil && target == f.Path {
			f.drifted.Store(&checkedFile{st: *st, differs: contentDiffers})
		}
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
		return res, f.write(td, tname, target, content, want.perm(have.mode), uid, gid, stage)
	}
	return res, want.applyIn(td, tname, fi, have)
}

// replaceLink handles a symbolic link at the managed path when links are
// managed: with content, the link itself is replaced by the file (the atomic
// rename swaps the directory entry; the link's target is never opened);
// attribute-only, it is refused, as chown and chmod would change the target.
func (f *File) replaceLink(ctx context.Context, d *safefs.Dir, name string, content []byte, manageContent bool, want meta, apply bool, stage *safefs.Group) (resources.Result, error) {
	dest, _ := d.Readlink(name)
	if !manageContent {
		return resources.Result{}, fmt.Errorf("%s is a symlink to %s: %w", f.Path, dest, ErrSymlink)
	}
	res := resources.Result{
		Changed: true,
		Message: verb(apply, "replace symlink to "+dest+" with a file", "replaced symlink to "+dest+" with a file"),
		Diff:    f.diff(ctx, f.Path, false, 0, nil, content, want.perm(0o644)),
	}
	if !apply {
		return res, nil
	}
	return res, f.write(d, name, f.Path, content, want.perm(0o644), want.uid, want.gid, stage)
}

func (f *File) directory(ctx context.Context, d *safefs.Dir, name string, env *resources.Env, apply bool) (resources.Result, error) {
	want, err := f.wantMetaIn(ctx, env)
	if err != nil {
		return resources.Result{}, err
	}
	path, td, tname := f.Path, d, name
	fi, err := d.Lstat(name)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 && f.follow() {
		path, fi, err = resolve(f.Path)
		if err != nil {
			return resources.Result{}, err
		}
		if td, tname, err = openParent(ctx, path); err != nil {
			return resources.Result{}, err
		}
		defer td.Close()
	}
	if errors.Is(err, fs.ErrNotExist) {
		res := resources.Result{Changed: true, Message: verb(apply, "create directory", "created directory")}
		if !apply {
			return res, nil
		}
		if err := d.Mkdir(name, 0o700); err != nil {
			return resources.Result{}, err
		}
		// Mkdir's mode passes through the umask; set it (and ownership)
		// explicitly, as for any existing directory.
		fi, err := d.Lstat(name)
		if err != nil {
			return resources.Result{}, err
		}
		want.mode, want.modeSet = want.perm(0o755), true
		return res, want.applyIn(d, name, fi, metaOf(fi))
	}
	if err != nil {
		return resources.Result{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		dest, _ := d.Readlink(name)
		return resources.Result{}, fmt.Errorf("%s exists and is not a directory (symlink to %s): %w", f.Path, dest, ErrSymlink)
	}
	if !fi.IsDir() {
		return resources.Result{}, fmt.Errorf("%s exists and is not a directory (%s)", path, typeName(fi))
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
	return res, want.applyIn(td, tname, fi, have)
}

func (f *File) absent(d *safefs.Dir, name string, apply bool) (resources.Result, error) {
	fi, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return resources.Result{}, nil
	}
	if err != nil {
		return resources.Result{}, err
	}
	what := typeName(fi)
	if fi.IsDir() {
		entries, err := os.ReadDir(f.Path)
		if err != nil {
			return resources.Result{}, err
		}
		if len(entries) > 0 {
			if !f.Force {
				return resources.Result{}, fmt.Errorf("refusing to remove non-empty directory %s (set force: true to remove it)", f.Path)
			}
			what = fmt.Sprintf("directory and its %d entries", len(entries))
		}
	}
	res := resources.Result{Changed: true, Message: verb(apply, "remove "+what, "removed "+what)}
	if !apply {
		return res, nil
	}
	if fi.IsDir() && f.Force {
		// RemoveAll never follows symbolic links inside the tree.
		return res, d.RemoveAll(name)
	}
	return res, d.Remove(name)
}

// resolve follows a symlink at path (links: follow) so content is written to
// its target, keeping the link. It returns the path to operate on and its
// info. A dangling link is an error: follow manages an existing target.
func resolve(path string) (string, fs.FileInfo, error) {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		dest, _ := os.Readlink(path)
		return "", nil, fmt.Errorf("%s is a dangling symlink to %s (links: follow needs an existing target): %w", path, dest, err)
	}
	fi, err := os.Lstat(target)
	return target, fi, err
}

// openParent opens path's parent directory by descriptor (safefs, through
// the segment's cache when ctx carries one): a missing one is an error
// wrapping fs.ErrNotExist, and so is an untrusted symbolic link on the way
// (*safefs.LinkError). The caller closes it.
func openParent(ctx context.Context, path string) (*safefs.Dir, string, error) {
	d, name, err := safefs.OpenParentContext(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("parent directory %s does not exist: %w", filepath.Dir(path), err)
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, "", fmt.Errorf("parent %s is not a directory: %w", filepath.Dir(path), err)
	}
	if err != nil {
		return nil, "", err
	}
	return d, name, nil
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
