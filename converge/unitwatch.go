package converge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/manifold-run/manifold/resources"
)

// MaxUnitsPerShow is how many units one `systemctl show` asks about; more
// watched units take one call per MaxUnitsPerShow (a command line stays
// far below the kernel's argument limit).
const MaxUnitsPerShow = 256

// unitProperties are the properties whose change is a hint: the service
// type converges running (ActiveState, SubState), enablement
// (UnitFileState) and reloads (NeedDaemonReload); LoadState says masked
// or gone.
var unitProperties = []string{"LoadState", "ActiveState", "SubState", "UnitFileState", "NeedDaemonReload"}

// UnitWatcherConfig configures a UnitWatcher.
type UnitWatcherConfig struct {
	// Runner runs systemctl. Defaults to resources.OSRunner.
	Runner resources.CommandRunner
	// Interval is the period of the poll. Defaults to 5s.
	Interval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c UnitWatcherConfig) withDefaults() UnitWatcherConfig {
	if c.Runner == nil {
		c.Runner = resources.OSRunner{}
	}
	if c.Interval <= 0 {
		c.Interval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// UnitWatcher watches the systemd units of service resources by polling:
// every Interval one `systemctl show` asks for the state of all of them
// (one process per MaxUnitsPerShow units, whatever the number of
// resources), and a unit whose state changed since the last poll hints
// the resources watching it ("unit nginx active/running → inactive/dead").
// The first poll of a unit is its baseline: it hints nothing.
//
// It polls rather than subscribing to systemd's D-Bus signals: one
// systemctl call per tick costs a few milliseconds of CPU, needs no
// system bus connection or permission, and sees every state change that
// lasts longer than a tick (a unit that fails and is restarted by systemd
// within one tick was not drift manifold had to repair).
//
// Set and Remove may be called from any goroutine; hints go to the channel
// given to NewUnitWatcher, which the caller must keep reading.
type UnitWatcher struct {
	cfg   UnitWatcherConfig
	hints chan<- Hint

	mu    sync.Mutex
	units map[string]map[string]bool // unit -> keys
	last  map[string]string          // unit -> state at the last poll
	byKey map[string][]string        // key -> its units

	stop func()
	wg   sync.WaitGroup
}

// NewUnitWatcher returns a watcher that sends its hints to hints. It polls
// once started.
func NewUnitWatcher(cfg UnitWatcherConfig, hints chan<- Hint) *UnitWatcher {
	return &UnitWatcher{cfg: cfg.withDefaults(), hints: hints, units: map[string]map[string]bool{},
		last: map[string]string{}, byKey: map[string][]string{}}
}

// Set watches the units among key's targets (others are ignored), in
// place of those it had.
func (u *UnitWatcher) Set(key string, targets []resources.WatchTarget) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.remove(key)
	for _, t := range targets {
		if t.Unit == "" {
			continue
		}
		if u.units[t.Unit] == nil {
			u.units[t.Unit] = map[string]bool{}
		}
		u.units[t.Unit][key] = true
		u.byKey[key] = append(u.byKey[key], t.Unit)
	}
}

// Remove stops watching key's units.
func (u *UnitWatcher) Remove(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.remove(key)
}

func (u *UnitWatcher) remove(key string) {
	for _, unit := range u.byKey[key] {
		delete(u.units[unit], key)
		if len(u.units[unit]) == 0 {
			delete(u.units, unit)
			delete(u.last, unit)
		}
	}
	delete(u.byKey, key)
}

// Units is the number of units watched.
func (u *UnitWatcher) Units() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.units)
}

// Start polls in the background until ctx ends or Stop. It does not block;
// the first poll (the baseline) is at once.
func (u *UnitWatcher) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	u.stop = cancel
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		t := time.NewTicker(u.cfg.Interval)
		defer t.Stop()
		for {
			if !u.Poll(ctx) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the poll and waits for it. Safe when never started, and twice.
func (u *UnitWatcher) Stop() {
	if u.stop != nil {
		u.stop()
	}
	u.wg.Wait()
}

// Poll asks systemctl once for every watched unit and hints the keys of
// those whose state changed. A failed systemctl is logged and skipped
// (the interval check covers the units meanwhile). It returns false when
// ctx ended while a hint was waiting to be taken.
func (u *UnitWatcher) Poll(ctx context.Context) bool {
	u.mu.Lock()
	units := make([]string, 0, len(u.units))
	for unit := range u.units {
		units = append(units, unit)
	}
	u.mu.Unlock()
	slices.Sort(units)
	for chunk := range slices.Chunk(units, MaxUnitsPerShow) {
		states, err := u.show(ctx, chunk)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			u.cfg.Logger.Warn("unit poll failed; units are covered by interval checks", "units", len(chunk), "error", err)
			continue
		}
		for _, h := range u.changed(chunk, states) {
			select {
			case u.hints <- h:
			case <-ctx.Done():
				return false
			}
		}
	}
	return true
}

// changed records states (one per unit of chunk) and returns the hints of
// the units whose state differs from the last poll's.
func (u *UnitWatcher) changed(chunk, states []string) []Hint {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []Hint
	for i, unit := range chunk {
		keys := u.units[unit]
		if keys == nil {
			continue // removed meanwhile
		}
		prev, seen := u.last[unit]
		u.last[unit] = states[i]
		if !seen || prev == states[i] {
			continue
		}
		why := fmt.Sprintf("unit %s %s → %s", unit, prev, states[i])
		for _, k := range sortedKeys(keys) {
			out = append(out, Hint{Key: k, Why: why})
		}
	}
	return out
}

// show runs one `systemctl show` for units and returns each one's state,
// in order: "active/running enabled", with "load=masked" or
// "needs-reload" appended when so.
func (u *UnitWatcher) show(ctx context.Context, units []string) ([]string, error) {
	argv := append([]string{"systemctl", "show", "--property=" + strings.Join(unitProperties, ","), "--"}, units...)
	res, err := u.cfg.Runner.Run(ctx, resources.Command{Argv: argv})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("systemctl show exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	blocks := parseShow(res.Stdout)
	if len(blocks) != len(units) {
		return nil, fmt.Errorf("systemctl show: %d blocks of properties for %d units", len(blocks), len(units))
	}
	states := make([]string, len(blocks))
	for i, p := range blocks {
		s := p["ActiveState"] + "/" + p["SubState"] + " " + p["UnitFileState"]
		if p["LoadState"] != "loaded" {
			s += " load=" + p["LoadState"]
		}
		if p["NeedDaemonReload"] == "yes" {
			s += " needs-reload"
		}
		states[i] = s
	}
	return states, nil
}

// parseShow splits systemctl show's output into one property map per unit
// (blocks of Key=value lines separated by an empty line).
func parseShow(out []byte) []map[string]string {
	var blocks []map[string]string
	var cur map[string]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if cur != nil {
				blocks = append(blocks, cur)
				cur = nil
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if cur == nil {
			cur = map[string]string{}
		}
		cur[k] = v
	}
	if cur != nil {
		blocks = append(blocks, cur)
	}
	return blocks
}
