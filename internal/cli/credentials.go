package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/manifold-run/manifold/deploy"
)

// role is the NATS identity a manifold process connects as. Each has its
// own nkey in the credentials directory and the permissions of its
// namesake in deploy/nats/accounts.conf.
type role string

const (
	// roleSubmitter: the CLI and scripts (run, apply --server, status,
	// runs, workers, cancel): submit and read runs.
	roleSubmitter role = "submitter"
	// roleCoordinator: `manifold coordinator`.
	roleCoordinator role = "coordinator"
	// roleWorker: `manifold worker`.
	roleWorker role = "worker"
	// roleAdmin: everything in manifold's account; the nats CLI context
	// `manifold server` writes uses it.
	roleAdmin role = "admin"
)

// roles in the order the server lists them.
var roles = []role{roleSubmitter, roleCoordinator, roleWorker, roleAdmin}

// permissionsVar is the variable of deploy/nats/accounts.conf holding the
// role's permissions; the admin has no restriction.
var permissionsVar = map[role]string{
	roleSubmitter:   "CLIENT_PERMISSIONS",
	roleCoordinator: "COORDINATOR_PERMISSIONS",
	roleWorker:      "WORKER_PERMISSIONS",
}

// credentialsEnv names the credentials directory, as --credentials does.
const credentialsEnv = "MANIFOLD_CREDENTIALS"

// systemCredentialsDir is where root's processes keep credentials.
const systemCredentialsDir = "/etc/manifold/credentials"

// seedFile is the nkey seed file of r in dir.
func seedFile(dir string, r role) string { return filepath.Join(dir, string(r)+".nk") }

// credentialsDir resolves the credentials directory: the flag, then
// $MANIFOLD_CREDENTIALS, then /etc/manifold/credentials for root, else
// $XDG_CONFIG_HOME/manifold/credentials (~/.config/manifold/credentials).
// explicit reports whether the flag or the variable named it.
func credentialsDir(flagValue string, getenv func(string) string, euid int) (dir string, explicit bool, err error) {
	if flagValue != "" {
		return flagValue, true, nil
	}
	if v := getenv(credentialsEnv); v != "" {
		return v, true, nil
	}
	if euid == 0 {
		return systemCredentialsDir, false, nil
	}
	base := getenv("XDG_CONFIG_HOME")
	if base == "" {
		home := getenv("HOME")
		if home == "" {
			if home, err = os.UserHomeDir(); err != nil {
				return "", false, fmt.Errorf("credentials directory: %w", err)
			}
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "manifold", "credentials"), false, nil
}

// ensureCredentials creates dir (mode 0700) and, for each role without
// one, a new nkey seed file (mode 0600), and returns every role's public
// key. Seeds are created by hard-linking a complete temporary file, so
// servers starting at once on the same directory agree on one seed per
// role. A seed file other users may read is refused. Missing parents are
// created 0755: /etc/manifold also holds the custom facts every user's
// commands read; only the credentials directory is private.
func ensureCredentials(dir string) (map[role]string, error) {
	if err := mkdirParents(filepath.Dir(dir)); err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	pubs := make(map[role]string, len(roles))
	for _, r := range roles {
		path := seedFile(dir, r)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			if err := createSeed(dir, path); err != nil {
				return nil, err
			}
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("credentials: %s may be read by other users (mode %04o): chmod 600 it", path, info.Mode().Perm())
		}
		seed, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("credentials: %w", err)
		}
		kp, err := nkeys.ParseDecoratedNKey(seed)
		if err != nil {
			return nil, fmt.Errorf("credentials: %s: %w", path, err)
		}
		pub, err := kp.PublicKey()
		kp.Wipe()
		if err != nil || !nkeys.IsValidPublicUserKey(pub) {
			return nil, fmt.Errorf("credentials: %s: not a user nkey seed", path)
		}
		pubs[r] = pub
	}
	return pubs, nil
}

// mkdirParents creates dir and its missing parents mode 0755 whatever the
// umask (a root umask of 077 would make /etc/manifold private again);
// existing directories are left as they are.
func mkdirParents(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirParents(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return os.Chmod(dir, 0o755)
}

// createSeed writes a new user nkey seed to path unless another process
// created it first.
func createSeed(dir, path string) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return fmt.Errorf("credentials: new nkey: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return fmt.Errorf("credentials: new nkey: %w", err)
	}
	// Wipe clears the slice Seed returned: write it first.
	defer kp.Wipe()
	tmp, err := os.CreateTemp(dir, ".seed-*")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(seed, '\n'))
	if err = errors.Join(err, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}

// serverAuthConfig is the NATS configuration that admits the roles' nkeys
// only, each with its permissions from deploy/nats/accounts.conf. They
// live in the server's global account, as anonymous clients did before.
func serverAuthConfig(pubs map[role]string) string {
	perms := deploy.AccountsConf
	if i := strings.Index(perms, "\naccounts {"); i >= 0 {
		perms = perms[:i]
	}
	var b strings.Builder
	b.WriteString(perms)
	b.WriteString("\nauthorization {\n  users: [\n")
	for _, r := range roles {
		if v := permissionsVar[r]; v != "" {
			fmt.Fprintf(&b, "    {nkey: %q, permissions: $%s}\n", pubs[r], v)
		} else {
			fmt.Fprintf(&b, "    {nkey: %q}\n", pubs[r])
		}
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// natsContextName is the NATS CLI context `manifold server` writes.
const natsContextName = "manifold"

// natsContextDescription marks a context file as written by manifold, so
// it is rewritten (the server's URL may change) while a user's own
// context of the same name is left alone.
const natsContextDescription = "manifold server (admin); written by manifold server"

// writeNATSContext writes the NATS CLI context "manifold" (the server's URL
// and the admin nkey) and returns its path. An existing file of that name
// that manifold did not write is kept and reported as an error.
func writeNATSContext(getenv func(string) string, url, dir string) (string, error) {
	path, err := contextPath(natsContextName, getenv)
	if err != nil {
		return "", err
	}
	if data, err := os.ReadFile(path); err == nil {
		var old struct {
			Description string `json:"description"`
		}
		if json.Unmarshal(data, &old) != nil || old.Description != natsContextDescription {
			return path, fmt.Errorf("nats context %s exists and was not written by manifold: left as is", path)
		}
	}
	abs, err := filepath.Abs(seedFile(dir, roleAdmin))
	if err != nil {
		return path, err
	}
	data, err := json.MarshalIndent(map[string]string{"description": natsContextDescription, "url": url, "nkey": abs}, "", "  ")
	if err != nil {
		return path, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return path, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".manifold-*.json")
	if err != nil {
		return path, err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(data, '\n'))
	if err = errors.Join(err, tmp.Close()); err != nil {
		return path, err
	}
	return path, os.Rename(tmp.Name(), path)
}
