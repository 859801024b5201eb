package bus

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Service registration (CCM's design): a resource with
// register_when_stable publishes a RegistrationEntry when it is applied,
// not failed, not noop and healthy; templates read the live entries with
// registrations(). The stream keeps one message per entry subject (a
// re-registration rolls the previous one up) and each message expires
// with its entry's TTL (the Nats-TTL header, nats-server 2.11 or later).
const (
	// StreamRegistrations holds service registrations: one message per
	// subject, per-message TTLs.
	StreamRegistrations = "MANIFOLD_REGISTRATIONS"
	// SubjectRegistrationsPrefix starts every registration subject:
	// manifold.registrations.<cluster>.<protocol>.<service>.<address>.<instance>.
	SubjectRegistrationsPrefix = "manifold.registrations"
	// SubjectRegistrationsAll matches every registration.
	SubjectRegistrationsAll = SubjectRegistrationsPrefix + ".>"
)

// Registration limits.
const (
	// MaxRegistrationBytes bounds one encoded entry (annotations included).
	MaxRegistrationBytes = 16 << 10
	// MaxRegistrationAnnotations bounds the annotations of one entry.
	MaxRegistrationAnnotations = 64
	// MaxRegistrationLookup bounds the entries one lookup returns; a query
	// matching more fails (narrow it).
	MaxRegistrationLookup = 10_000
	// MinRegistrationTTL is the shortest TTL (the server's granularity).
	MinRegistrationTTL = time.Second
	// RegistrationTTLNever keeps an entry until it is registered again
	// or removed, past the stream's MaxAge.
	RegistrationTTLNever = "never"
)

// ErrRegistrationInvalid: an entry breaks a rule of RegistrationEntry.
var ErrRegistrationInvalid = errors.New("registration is invalid")

// RegistrationEntry is one service endpoint, as CCM publishes it (same
// JSON fields), plus manifold's envelope version and provenance.
type RegistrationEntry struct {
	V int `json:"v"`
	// Cluster, Service and Protocol are names: a letter, then letters,
	// digits, '_' and '-', at most 128 characters.
	Cluster  string `json:"cluster"`
	Service  string `json:"service"`
	Protocol string `json:"protocol"`
	// Address is an IP address or a DNS host name.
	Address string `json:"address"`
	// Port is 1 to 65535, or 0 for none.
	Port int `json:"port,omitempty"`
	// Priority is 1 to 255, lower is preferred.
	Priority int `json:"priority"`
	// TTL is a Go duration of at least 1s, "never", or empty for the
	// stream's MaxAge.
	TTL string `json:"ttl,omitempty"`
	// Annotations are free key-value metadata.
	Annotations map[string]string `json:"annotations,omitempty"`
	// Worker and Resource say who registered it; Time when.
	Worker   string    `json:"worker,omitempty"`
	Resource string    `json:"resource,omitempty"`
	Time     time.Time `json:"time,omitzero"`
}

var registrationName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_-]{0,127}$`) })

// hostName is a DNS name: labels of letters, digits and '-', joined by
// dots (no '_', so the subject token maps back).
var hostName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$`)
})

// Validate checks e against the rules above; errors name the field and
// wrap ErrRegistrationInvalid.
func (e RegistrationEntry) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrRegistrationInvalid}, args...)...)
	}
	for _, f := range []struct{ name, v string }{{"cluster", e.Cluster}, {"service", e.Service}, {"protocol", e.Protocol}} {
		if f.v == "" {
			return bad("%s is required", f.name)
		}
		if !registrationName().MatchString(f.v) {
			return bad("%s %q must match [a-zA-Z][a-zA-Z0-9_-]* (at most 128 characters)", f.name, f.v)
		}
	}
	if e.Address == "" {
		return bad("address is required")
	}
	if net.ParseIP(e.Address) == nil && (len(e.Address) > 253 || !hostName().MatchString(e.Address)) {
		return bad("address %q is neither an IP address nor a host name", e.Address)
	}
	if e.Port < 0 || e.Port > math.MaxUint16 {
		return bad("port %d must be between 1 and 65535", e.Port)
	}
	if e.Priority < 1 || e.Priority > math.MaxUint8 {
		return bad("priority %d must be between 1 and 255 (lower is preferred)", e.Priority)
	}
	if _, err := ParseRegistrationTTL(e.TTL); err != nil {
		return bad("%v", err)
	}
	if len(e.Annotations) > MaxRegistrationAnnotations {
		return bad("%d annotations, at most %d", len(e.Annotations), MaxRegistrationAnnotations)
	}
	return nil
}

// ParseRegistrationTTL parses a TTL: "" (none: the stream's MaxAge),
// "never", or a Go duration of at least MinRegistrationTTL. It returns
// the duration (0 for "" and "never").
func ParseRegistrationTTL(s string) (time.Duration, error) {
	if s == "" || s == RegistrationTTLNever {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("ttl %q: a duration such as 30s or 10m, or %q", s, RegistrationTTLNever)
	}
	if d < MinRegistrationTTL {
		return 0, fmt.Errorf("ttl %q: at least %s", s, MinRegistrationTTL)
	}
	return d, nil
}

// InstanceID is the hash of the entry's identity (cluster, service,
// protocol, address, port): CCM's, so the same endpoint has the same
// subject in both.
func (e RegistrationEntry) InstanceID() string {
	h := fnv.New64a()
	h.Write([]byte(e.Cluster))
	h.Write([]byte(e.Service))
	h.Write([]byte(e.Protocol))
	h.Write([]byte(e.Address))
	fmt.Fprintf(h, "%d", e.Port)
	return hex.EncodeToString(h.Sum(nil))
}

// RegistrationSubject returns the subject of an entry:
// manifold.registrations.<cluster>.<protocol>.<service>.<address>.<instance>,
// the address's dots written '_'.
func RegistrationSubject(e RegistrationEntry) string {
	return strings.Join([]string{SubjectRegistrationsPrefix, e.Cluster, e.Protocol, e.Service, addressToken(e.Address), e.InstanceID()}, ".")
}

// RegistrationFilter returns the subject filter of a lookup; "" or "*"
// matches any value in that position.
func RegistrationFilter(cluster, protocol, service, address string) string {
	wild := func(s string) string {
		if s == "" || s == "*" {
			return "*"
		}
		return token(s)
	}
	addr := "*"
	if address != "" && address != "*" {
		addr = addressToken(address)
	}
	return strings.Join([]string{SubjectRegistrationsPrefix, wild(cluster), wild(protocol), wild(service), addr, "*"}, ".")
}

// addressToken makes an address one subject token.
func addressToken(a string) string {
	return strings.NewReplacer(".", "_", " ", "_", "*", "_", ">", "_").Replace(a)
}

// registrationsStream is the stream's configuration, provisioned by Open.
func registrationsStream(cfg Config) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: StreamRegistrations, Subjects: []string{SubjectRegistrationsAll}, Retention: jetstream.LimitsPolicy,
		MaxMsgsPerSubject: 1, AllowRollup: true, AllowMsgTTL: true, DenyDelete: true,
		MaxAge: RegistrationsMaxAge, SubjectDeleteMarkerTTL: registrationMarkerTTL, Replicas: cfg.Replicas,
		Description: "manifold service registrations (register_when_stable): one entry per subject, per-message TTL",
	}
}

// registrationsReady makes the registrations stream on the first use of a
// bus opened OnDemand (Open made it otherwise).
func (b *Bus) registrationsReady(ctx context.Context) error {
	if !b.cfg.OnDemand {
		return nil
	}
	b.regMu.Lock()
	defer b.regMu.Unlock()
	if b.registrations {
		return nil
	}
	sc := registrationsStream(b.cfg)
	sc.Storage = b.storage()
	if _, err := b.js.CreateOrUpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("bus: provision stream %s: %w", sc.Name, err)
	}
	b.registrations = true
	return nil
}

// registrationMarkerTTL is how long the marker of an expired entry stays
// (a watcher sees the removal).
const registrationMarkerTTL = 15 * time.Minute

// RegistrationsMaxAge bounds how long an entry without a TTL (or a "never"
// one's predecessor) is kept: 24h. Entries with a TTL expire with it.
const RegistrationsMaxAge = 24 * time.Hour

// Header names of the registration messages (ADR-43).
const (
	headerTTL            = "Nats-TTL"
	headerRollup         = "Nats-Rollup"
	headerExpectedStream = "Nats-Expected-Stream"
	headerMarkerReason   = "Nats-Marker-Reason"
)

// Register publishes e (validated, stamped with the envelope version and,
// when zero, the time) and waits for the stream's acknowledgement. It
// replaces the previous message of the same endpoint.
func (b *Bus) Register(ctx context.Context, e RegistrationEntry) error {
	e.V = Version
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if err := e.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("bus: encode registration: %w", err)
	}
	if len(data) > MaxRegistrationBytes {
		return fmt.Errorf("%w: registration %s/%s/%s/%s is %d bytes, at most %d", ErrTooLarge, e.Cluster, e.Protocol, e.Service, e.Address, len(data), MaxRegistrationBytes)
	}
	if err := b.registrationsReady(ctx); err != nil {
		return err
	}
	msg := nats.NewMsg(RegistrationSubject(e))
	msg.Data = data
	if e.TTL != "" {
		msg.Header.Set(headerTTL, e.TTL)
	}
	msg.Header.Set(headerRollup, "sub")
	msg.Header.Set(headerExpectedStream, StreamRegistrations)
	InjectTrace(ctx, msg.Header)
	if _, err := b.js.PublishMsg(ctx, msg); err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			return fmt.Errorf("bus: register %s: no stream %s (a coordinator of this version provisions it; nats-server 2.11 or later): %w", msg.Subject, StreamRegistrations, err)
		}
		return fmt.Errorf("bus: register %s: %w", msg.Subject, err)
	}
	return nil
}

// Registrations returns the live entries matching cluster, protocol,
// service and address ("" or "*" for any), sorted by cluster, protocol,
// service, address, port. Expired and removed entries are left out. A
// query matching more than MaxRegistrationLookup entries is an error
// wrapping ErrTooLarge.
func (b *Bus) Registrations(ctx context.Context, cluster, protocol, service, address string) ([]RegistrationEntry, error) {
	filter := RegistrationFilter(cluster, protocol, service, address)
	if err := b.registrationsReady(ctx); err != nil {
		return nil, err
	}
	// One ephemeral consumer delivering the last message of each matching
	// subject: its creation tells how many there are, a fetch reads them.
	c, err := b.js.CreateConsumer(ctx, StreamRegistrations, jetstream.ConsumerConfig{
		FilterSubject: filter, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute, MemoryStorage: true, Replicas: 1})
	if err != nil {
		return nil, registrationsErr(filter, err)
	}
	info := c.CachedInfo()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = b.js.DeleteConsumer(dctx, StreamRegistrations, info.Name) // else it lapses after InactiveThreshold
	}()
	pending := int(info.NumPending)
	if pending > MaxRegistrationLookup+registrationMarkerSlack {
		return nil, fmt.Errorf("%w: registrations %s: %d entries match, at most %d; narrow the query", ErrTooLarge, filter, pending, MaxRegistrationLookup)
	}
	out := []RegistrationEntry{}
	for pending > 0 {
		batch, err := c.FetchNoWait(min(pending, 1000))
		if err != nil {
			return nil, registrationsErr(filter, err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			if msg.Headers().Get(headerMarkerReason) != "" {
				continue // an expired, removed or purged entry
			}
			var e RegistrationEntry
			if err := Decode(msg.Data(), &e); err != nil {
				return nil, fmt.Errorf("bus: registration %s: %w", msg.Subject(), err)
			}
			out = append(out, e)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, registrationsErr(filter, err)
		}
		if n == 0 {
			break // entries expired since the consumer was created
		}
		pending -= n
	}
	if len(out) > MaxRegistrationLookup {
		return nil, fmt.Errorf("%w: registrations %s: %d entries match, at most %d; narrow the query", ErrTooLarge, filter, len(out), MaxRegistrationLookup)
	}
	slices.SortFunc(out, func(a, b RegistrationEntry) int {
		return cmpStrings(a.Cluster, b.Cluster, a.Protocol, b.Protocol, a.Service, b.Service, a.Address, b.Address, fmt.Sprint(a.Port), fmt.Sprint(b.Port))
	})
	return out, nil
}

// registrationMarkerSlack lets a lookup read markers of expired entries
// beyond MaxRegistrationLookup live ones.
const registrationMarkerSlack = 10_000

func registrationsErr(filter string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("bus: registrations %s: no stream %s (a coordinator of this version provisions it): %w", filter, StreamRegistrations, ErrNotFound)
	}
	return fmt.Errorf("bus: registrations %s: %w", filter, err)
}

// Deregister removes an entry at once (purging its subject), before its
// TTL ends.
func (b *Bus) Deregister(ctx context.Context, e RegistrationEntry) error {
	if err := b.registrationsReady(ctx); err != nil {
		return err
	}
	st, err := b.js.Stream(ctx, StreamRegistrations)
	if err != nil {
		return registrationsErr(RegistrationSubject(e), err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(RegistrationSubject(e))); err != nil {
		return fmt.Errorf("bus: deregister %s: %w", RegistrationSubject(e), err)
	}
	return nil
}

// cmpStrings compares pairs (a1, b1, a2, b2, ...) in order.
func cmpStrings(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if c := strings.Compare(pairs[i], pairs[i+1]); c != 0 {
			return c
		}
	}
	return 0
}
