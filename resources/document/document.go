package document

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/merge"
	"github.com/manifold-run/manifold/resources/safefs"
)

// Type is the resource type name the document type registers under.
const Type = "document"

// MaxDocumentBytes bounds the document a run reads or writes (a file or a
// kv entry); larger ones fail with ErrTooLarge.
const MaxDocumentBytes = 4 << 20

// Format is how a document is written.
type Format string

const (
	// FormatJSON is JSON, written indented as the file was (two spaces for a
	// new one).
	FormatJSON Format = "json"
	// FormatYAML is one YAML document.
	FormatYAML Format = "yaml"
)

// Provider is where a document lives.
type Provider string

const (
	// ProviderFile manages a file; its name is an absolute path.
	ProviderFile Provider = "file"
	// ProviderKV manages a NATS KV entry; its name is kv://bucket/key.
	ProviderKV Provider = "kv"
)

// kvScheme prefixes the names of kv documents.
const kvScheme = "kv://"

// Properties are the document type's own properties.
type Properties struct {
	// Content is the desired document: a map or a list, or a string holding
	// JSON or YAML.
	Content json.RawMessage `json:"content,omitempty"`
	// Format is json or yaml; empty means from the file's extension (.json,
	// .yaml, .yml), json for kv entries.
	Format Format `json:"format,omitempty"`
	// MergeKeys, Atomic and Sets are merge.Options by dotted path.
	MergeKeys map[string][]string `json:"merge_keys,omitempty"`
	Atomic    []string            `json:"atomic,omitempty"`
	Sets      []string            `json:"sets,omitempty"`
	// Mode is an octal permission ("0644"); empty keeps the file's (0644
	// for a new file). Files only.
	Mode string `json:"mode,omitempty"`
	// Owner and Group are names or numeric ids; empty keeps the file's.
	// Files only.
	Owner string `json:"owner,omitempty"`
	Group string `json:"group,omitempty"`
}

// Config is what a document factory shares between the resources it
// builds.
type Config struct {
	// Buckets opens NATS KV buckets for kv:// documents; nil makes them fail
	// with ErrNoBuckets.
	Buckets Buckets
	// StateDir is the FileStore directory used when Env.State is nil.
	// Defaults to DefaultStateDir().
	StateDir string
	// Host scopes the FileStore's keys. Defaults to os.Hostname().
	Host string
}

// Document is one document resource.
type Document struct {
	// Name is an absolute path or kv://bucket/key.
	Name string
	// Ensure is the desired state; only "present" (or empty).
	Ensure string
	// Provider is the spec's provider; empty means from the name.
	Provider Provider
	Properties

	cfg     Config
	desired any
}

var _ resources.Resource = (*Document)(nil)

// New is the document type's resources.Factory with the zero Config: files
// work, kv:// documents fail with ErrNoBuckets.
func New(spec resources.Spec) (resources.Resource, error) {
	return NewFactory(Config{})(spec)
}

// NewFactory returns a factory whose resources use cfg.
func NewFactory(cfg Config) resources.Factory {
	return func(spec resources.Spec) (resources.Resource, error) {
		d := &Document{Name: spec.Name, Ensure: spec.Ensure, Provider: Provider(spec.Provider), cfg: cfg}
		if err := resources.DecodeProperties(spec.Properties, &d.Properties); err != nil {
			return nil, err
		}
		return d, nil
	}
}

func (d *Document) provider() Provider {
	if strings.HasPrefix(d.Name, kvScheme) {
		return ProviderKV
	}
	return ProviderFile
}

func (d *Document) format() Format {
	if d.Format != "" {
		return d.Format
	}
	if d.provider() == ProviderKV {
		return FormatJSON
	}
	switch strings.ToLower(filepath.Ext(d.Name)) {
	case ".json":
		return FormatJSON
	case ".yaml", ".yml":
		return FormatYAML
	}
	return ""
}

func (d *Document) options() merge.Options {
	return merge.Options{MergeKeys: d.MergeKeys, Atomic: d.Atomic, Sets: d.Sets}
}

// Validate checks the properties without touching the system, and parses
// the content.
func (d *Document) Validate() error {
	if d.Ensure != "" && d.Ensure != "present" {
		return fmt.Errorf("ensure %q: a document can only be present", d.Ensure)
	}
	p := d.provider()
	if d.Provider != "" && d.Provider != p {
		return fmt.Errorf("provider %q: name %q needs provider %q", d.Provider, d.Name, p)
	}
	switch p {
	case ProviderKV:
		if _, _, err := splitKV(d.Name); err != nil {
			return err
		}
		if d.Mode != "" || d.Owner != "" || d.Group != "" {
			return errors.New("mode, owner and group apply to files, not kv entries")
		}
	default:
		if !filepath.IsAbs(d.Name) {
			return fmt.Errorf("name %q: must be an absolute path or kv://bucket/key", d.Name)
		}
		if filepath.Clean(d.Name) == "/" {
			return errors.New(`name "/": not a file`)
		}
		if _, _, err := parseMode(d.Mode); err != nil {
			return err
		}
	}
	switch d.format() {
	case FormatJSON, FormatYAML:
	case "":
		return fmt.Errorf("format: cannot tell from the name %q; set json or yaml", d.Name)
	default:
		return fmt.Errorf("format %q: must be json or yaml", d.Format)
	}
	if err := d.options().Validate(); err != nil {
		return err
	}
	if len(d.Content) == 0 {
		return errors.New("content: required")
	}
	desired, err := decodeContent(d.Content)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	// Check the options against the desired document once, before any run.
	if _, err := merge.Merge(nil, nil, desired, d.options()); err != nil {
		return fmt.Errorf("content: %w", err)
	}
	d.desired = desired
	return nil
}

// CheckApply reports how the document differs from the merge of its content
// into it and, when apply is true, writes the merge and records the content
// as last applied.
func (d *Document) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if err := ctx.Err(); err != nil {
		return resources.Result{}, err
	}
	if env == nil {
		env = &resources.Env{}
	}
	if d.desired == nil {
		if err := d.Validate(); err != nil {
			return resources.Result{}, err
		}
	}
	if d.provider() == ProviderKV {
		return d.checkKV(ctx, env, apply)
	}
	return d.checkFile(ctx, env, apply)
}

// stateKey is the key of the last-applied content in the store.
func (d *Document) stateKey() string { return Type + "#" + d.Name }

func (d *Document) store(env *resources.Env) Store {
	if env.State != nil {
		return env.State
	}
	dir := d.cfg.StateDir
	if dir == "" {
		dir = DefaultStateDir()
	}
	return &FileStore{Dir: dir, Host: d.cfg.Host}
}

// plan is one merge: what is there, what it becomes.
type plan struct {
	tree    *tree
	last    any
	merged  any
	changed bool
	diff    string
}

// plan parses the observed bytes (exists false: no document) and merges.
func (d *Document) plan(ctx context.Context, env *resources.Env, store Store, data []byte) (*plan, error) {
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", d.Name, ErrTooLarge, len(data), MaxDocumentBytes)
	}
	t, err := parse(d.format(), data)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.File = d.Name
		}
		return nil, err
	}
	last, err := d.loadLast(ctx, env, store)
	if err != nil {
		return nil, err
	}
	merged, err := merge.Merge(last, t.value, d.desired, d.options())
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	return &plan{
		tree:    t,
		last:    last,
		merged:  merged,
		changed: t.value == nil || !merge.Equal(t.value, merged),
		diff:    merge.Diff(t.value, merged),
	}, nil
}

// loadLast reads the last-applied content; none (or an unreadable record,
// logged) is nil: nothing will be deleted.
func (d *Document) loadLast(ctx context.Context, env *resources.Env, store Store) (any, error) {
	raw, ok, err := store.Get(ctx, d.stateKey())
	if err != nil {
		return nil, fmt.Errorf("last-applied of %s: %w", d.Name, err)
	}
	if !ok {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var last any
	if err := dec.Decode(&last); err != nil {
		if env.Logger != nil {
			env.Logger.Warn("last-applied record unreadable; nothing will be deleted this run",
				"resource", Type+"#"+d.Name, "error", err)
		}
		return nil, nil
	}
	return normalize(last), nil
}

// saveLast records the desired content as last applied.
func (d *Document) saveLast(ctx context.Context, store Store) error {
	raw, err := json.Marshal(d.desired)
	if err != nil {
		return err
	}
	if err := store.Put(ctx, d.stateKey(), raw); err != nil {
		return fmt.Errorf("record last-applied of %s: %w", d.Name, err)
	}
	return nil
}

// settle runs when the document needs no change: outside noop, a record
// that is missing or stale (the document converged by other means) is
// brought up to date, so a field dropped later is deleted then. This is
// bookkeeping, not a change of the system.
func (d *Document) settle(ctx context.Context, env *resources.Env, store Store, p *plan) error {
	if env.Noop || (p.last != nil && merge.Equal(p.last, d.desired)) {
		return nil
	}
	return d.saveLast(ctx, store)
}

// checkFile merges into the file d.Name. Its directory is opened by
// descriptor (safefs: no untrusted symlink on the way, none at the name);
// with apply, the lock file beside the document is held from the read to
// the write of the last-applied record, so concurrent writers of one
// document (two workers, two `manifold apply`) never lose an update.
func (d *Document) checkFile(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	want, err := d.wantMeta()
	if err != nil {
		return resources.Result{}, err
	}
	dir, name, err := safefs.OpenParent(d.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return resources.Result{}, fmt.Errorf("parent directory %s does not exist", filepath.Dir(d.Name))
	}
	if err != nil {
		return resources.Result{}, err
	}
	defer dir.Close()
	if apply {
		unlock, err := dir.Lock(ctx, name)
		if err != nil {
			return resources.Result{}, fmt.Errorf("%s: %w", d.Name, err)
		}
		defer unlock()
	}
	var (
		data   []byte
		have   meta
		exists bool
	)
	// Opened first, then described: a writer renaming over the document
	// meanwhile gives the old or the new file, never a mismatch.
	f, pathOnly, err := dir.Open(name, syscall.O_RDONLY, nil)
	var fi fs.FileInfo
	if err == nil {
		defer f.Close()
		fi, err = f.Stat()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, safefs.ErrSymlink):
		dest, _ := dir.Readlink(name)
		return resources.Result{}, fmt.Errorf("%s is a symlink to %s: %w", d.Name, dest, ErrSymlink)
	case err != nil:
		return resources.Result{}, err
	case !fi.Mode().IsRegular():
		return resources.Result{}, fmt.Errorf("%s is not a regular file (%s)", d.Name, fi.Mode().Type())
	case fi.Size() > MaxDocumentBytes:
		return resources.Result{}, fmt.Errorf("%s: %w: %d bytes, the limit is %d", d.Name, ErrTooLarge, fi.Size(), MaxDocumentBytes)
	case pathOnly:
		return resources.Result{}, &fs.PathError{Op: "read", Path: d.Name, Err: fs.ErrPermission}
	default:
		exists, have = true, metaOf(fi)
		if data, err = io.ReadAll(io.LimitReader(f, MaxDocumentBytes+1)); err != nil {
			return resources.Result{}, err
		}
	}

	store := d.store(env)
	p, err := d.plan(ctx, env, store, data)
	if err != nil {
		return resources.Result{}, err
	}
	var changes []string
	if p.changed {
		changes = append(changes, contentChange(exists, p.diff, apply))
	}
	if exists {
		changes = append(changes, want.differences(have)...)
	}
	if len(changes) == 0 {
		return resources.Result{}, d.settle(ctx, env, store, p)
	}
	m := want
	if exists {
		m = want.over(have)
	} else if !m.modeSet {
		m.mode = 0o644
	}
	diff := p.diff
	if !diffable(d.Name, exists, m.mode) {
		diff = fmt.Sprintf("diff hidden: %s is not readable by other users", d.Name)
	}
	res := resources.Result{Changed: true, Message: strings.Join(changes, ", "), Diff: diff}
	if !apply {
		return res, nil
	}
	if p.changed {
		out, err := p.tree.render(p.merged)
		if err != nil {
			return resources.Result{}, fmt.Errorf("%s: render: %w", d.Name, err)
		}
		if len(out) > MaxDocumentBytes {
			return resources.Result{}, fmt.Errorf("%s: %w: the merged document has %d bytes, the limit is %d", d.Name, ErrTooLarge, len(out), MaxDocumentBytes)
		}
		if err := dir.WriteFile(name, out, m.mode, m.uid, m.gid); err != nil {
			return resources.Result{}, fmt.Errorf("write %s: %w", d.Name, err)
		}
	} else if err := want.applyTo(dir, name, fi, have); err != nil {
		return resources.Result{}, err
	}
	return res, d.saveLast(ctx, store)
}

// diffable tells whether an unprivileged user of the host could read the
// document at path now (when it exists) and once written with mode: the
// rule for showing its values in diffs (safefs.ReadableByOthers).
func diffable(path string, exists bool, mode fs.FileMode) bool {
	if mode&0o004 == 0 || !safefs.ReachableByOthers(filepath.Dir(path)) {
		return false
	}
	return !exists || safefs.ReadableByOthers(path)
}

// contentChange words a content change: "create", "update 3 fields"
// (check) or "created", "updated 3 fields" (apply).
func contentChange(exists bool, diff string, apply bool) string {
	if !exists {
		return verb(apply, "create", "created")
	}
	n := 0
	for line := range strings.Lines(diff) {
		if rest, ok := strings.CutPrefix(line, "… and "); ok {
			more, _, _ := strings.Cut(rest, " ")
			m, _ := strconv.Atoi(more)
			n += m
		} else if slices.Contains([]string{"+", "-", "~"}, line[:1]) {
			n++
		}
	}
	noun := "fields"
	if n == 1 {
		noun = "field"
	}
	return fmt.Sprintf("%s %d %s", verb(apply, "update", "updated"), n, noun)
}

func verb(apply bool, check, applied string) string {
	if apply {
		return applied
	}
	return check
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
