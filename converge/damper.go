package converge

import (
	"sync"
	"time"
)

// DamperConfig says when repairs of one resource are a fight.
type DamperConfig struct {
	// Window is the span in which repairs are counted. Defaults to 10s.
	Window time.Duration
	// Threshold is how many repairs within Window are still normal; the
	// next ones are backed off and the resource is flapping. Defaults to 3.
	Threshold int
	// Base is the first back-off, doubled at each further repair. Defaults
	// to 1s.
	Base time.Duration
	// Max caps the back-off. Defaults to 5m.
	Max time.Duration
}

func (c DamperConfig) withDefaults() DamperConfig {
	if c.Window <= 0 {
		c.Window = 10 * time.Second
	}
	if c.Threshold <= 0 {
		c.Threshold = 3
	}
	if c.Base <= 0 {
		c.Base = time.Second
	}
	if c.Max <= 0 {
		c.Max = 5 * time.Minute
	}
	return c
}

// Damper backs off the repairs of resources that another writer keeps
// changing. It never refuses a repair for good: a flapping resource is
// repaired at the backed-off pace. Safe for concurrent use; the clock is
// the caller's (times are passed in).
type Damper struct {
	cfg DamperConfig
	mu  sync.Mutex
	by  map[string]*damped
}

type damped struct {
	repairs []time.Time // within the window, oldest first
	level   int         // back-offs in a row
	next    time.Time   // no repair before
}

// NewDamper returns a damper with cfg's bounds.
func NewDamper(cfg DamperConfig) *Damper {
	return &Damper{cfg: cfg.withDefaults(), by: map[string]*damped{}}
}

// Allow says whether key may be repaired at now. When not, at is when it
// may; flapping says the resource is being fought over (also while it is
// allowed at the backed-off pace).
func (d *Damper) Allow(key string, now time.Time) (ok bool, at time.Time, flapping bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.by[key]
	if s == nil {
		return true, now, false
	}
	d.expire(s, now)
	if now.Before(s.next) {
		return false, s.next, true
	}
	return true, now, s.level > 0
}

// Repaired records a repair (a change made) of key at now.
func (d *Damper) Repaired(key string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.by[key]
	if s == nil {
		s = &damped{}
		d.by[key] = s
	}
	d.expire(s, now)
	s.repairs = append(s.repairs, now)
	if len(s.repairs) <= d.cfg.Threshold {
		return
	}
	back := d.cfg.Base << min(s.level, 30)
	if back <= 0 || back > d.cfg.Max {
		back = d.cfg.Max
	}
	s.level++
	s.next = now.Add(back)
}

// Stable records that key was checked and found converged: its fight, if
// any, is over once the window passes without repairs.
func (d *Damper) Stable(key string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.by[key]; s != nil {
		d.expire(s, now)
		if len(s.repairs) == 0 {
			delete(d.by, key)
		}
	}
}

// Flapping lists the keys being backed off at now.
func (d *Damper) Flapping(now time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for k, s := range d.by {
		d.expire(s, now)
		if s.level > 0 {
			out = append(out, k)
		}
	}
	return out
}

// expire drops repairs older than the window; with none left and the
// back-off served, the resource is calm again.
func (d *Damper) expire(s *damped, now time.Time) {
	cut := now.Add(-d.cfg.Window)
	i := 0
	for i < len(s.repairs) && !s.repairs[i].After(cut) {
		i++
	}
	s.repairs = s.repairs[i:]
	if len(s.repairs) == 0 && !now.Before(s.next) {
		s.level = 0
	}
}
