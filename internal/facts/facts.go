package facts

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/mem"
	gnet "github.com/shirou/gopsutil/v4/net"

	"github.com/manifold-run/manifold/internal/hiera"
	"github.com/manifold-run/manifold/resources/template"
)

// Opts are the inputs of Gather.
type Opts struct {
	// Dir holds custom facts: facts.json, facts.yaml and facts.d/*.json,
	// facts.d/*.yaml, merged deep in that order (later wins). Empty reads
	// none; a missing directory or file is not an error.
	Dir string
	// DirOptional is set when Dir is a default the user did not name: a
	// Dir this user may not read is then a warning (Warn), not an error.
	DirOptional bool
	// Warn receives what was skipped (see DirOpts.Warn). Nil ignores it.
	Warn func(error)
	// Overrides are "key=value" facts (--fact): dotted keys nest, values
	// are YAML scalars. They win over every other source.
	Overrides []string
	// NoSystem skips the gopsutil facts (for rendering with given facts
	// only).
	NoSystem bool
	// Timeout bounds gathering system facts when ctx has no deadline.
	// Defaults to 10s.
	Timeout time.Duration
}

// Gather returns the host's facts: system facts (unless NoSystem), custom
// facts from Dir merged over them as CCM does (maps recursively, lists
// concatenated), then Overrides, which always win. A system fact group that
// cannot be read (a container without /proc/partitions, say) keeps its
// empty shape; a bad custom facts file or override is an error naming it.
func Gather(ctx context.Context, o Opts) (map[string]any, error) {
	facts := map[string]any{}
	if !o.NoSystem {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cmp.Or(o.Timeout, 10*time.Second))
			defer cancel()
		}
		facts = System(ctx)
	}
	if o.Dir != "" {
		custom, err := FromDirOpts(o.Dir, DirOpts{Optional: o.DirOptional, Warn: o.Warn})
		if err != nil {
			return nil, err
		}
		facts = hiera.Merge(facts, custom)
	}
	over, err := hiera.ParseAssignments(o.Overrides)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	return hiera.Override(facts, normalize(over).(map[string]any)), nil
}

// System reads the gopsutil facts. Groups that fail stay empty. The groups
// are read at once (each is mostly waiting on /proc and syscalls), which
// halves the time a start spends on them.
func System(ctx context.Context) map[string]any {
	groups := map[string]func() any{
		"host": func() any {
			return map[string]any{"info": plain(ignoreErr(hostInfo(ctx)), map[string]any{})}
		},
		"network":   func() any { return network(ctx) },
		"cpu":       func() any { return map[string]any{"info": plain(ignoreErr(cpu.InfoWithContext(ctx)), []any{})} },
		"memory":    func() any { return memory(ctx) },
		"partition": func() any { return partitions(ctx) },
	}
	out := make(map[string]any, len(groups))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, read := range groups {
		wg.Go(func() {
			v := read()
			mu.Lock()
			out[name] = v
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func ignoreErr[T any](v T, _ error) T { return v }

func memory(ctx context.Context) map[string]any {
	return map[string]any{
		"virtual": plain(ignoreErr(mem.VirtualMemoryWithContext(ctx)), map[string]any{}),
		"swap": map[string]any{
			"info":    plain(ignoreErr(mem.SwapMemoryWithContext(ctx)), map[string]any{}),
			"devices": plain(ignoreErr(mem.SwapDevicesWithContext(ctx)), []any{}),
		},
	}
}

func partitions(ctx context.Context) map[string]any {
	parts, _ := disk.PartitionsWithContext(ctx, false)
	var usage []*disk.UsageStat
	for _, p := range parts {
		if u, err := disk.UsageWithContext(ctx, p.Mountpoint); err == nil {
			usage = append(usage, u)
		}
	}
	return map[string]any{
		"partitions": plain(parts, []any{}),
		"usage":      plain(usage, []any{}),
	}
}

// network returns interfaces, global addresses and the addresses of the
// interfaces holding the default IPv4 and IPv6 routes.
func network(ctx context.Context) map[string]any {
	out := map[string]any{"interfaces": []any{}, "addresses": []any{}, "default_ipv4": "", "default_ipv6": ""}
	ifaces, err := gnet.InterfacesWithContext(ctx)
	if err != nil {
		return out
	}
	out["interfaces"] = plain(ifaces, []any{})
	dflt4 := defaultInterface(ctx, ifaces, "udp4", "192.0.2.1:53")
	dflt6 := defaultInterface(ctx, ifaces, "udp6", "[2001:db8::1]:53")
	addrs := []any{}
	for _, i := range ifaces {
		for _, a := range i.Addrs {
			ip, _, err := net.ParseCIDR(a.Addr)
			if err != nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
				continue
			}
			v4 := ip.To4() != nil
			dflt := (v4 && i.Name == dflt4) || (!v4 && i.Name == dflt6)
			addrs = append(addrs, map[string]any{"interface": i.Name, "address": ip.String(), "ipv4": v4, "default": dflt})
			switch {
			case dflt && v4:
				out["default_ipv4"] = ip.String()
			case dflt:
				out["default_ipv6"] = ip.String()
			}
		}
	}
	out["addresses"] = addrs
	return out
}

// defaultInterface names the interface of ifaces the kernel would route
// to addr through. Connecting a UDP socket sends nothing. The interfaces
// are those gopsutil read (net.Interfaces and each one's Addrs, as
// "address/prefix"): reading them again took a netlink dump per
// interface, twice.
func defaultInterface(ctx context.Context, ifaces gnet.InterfaceStatList, network, addr string) string {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	local, ok := conn.LocalAddr().(*net.UDPAddr)
	if !ok {
		return ""
	}
	for _, iface := range ifaces {
		for _, a := range iface.Addrs {
			if ip, _, err := net.ParseCIDR(a.Addr); err == nil && ip.Equal(local.IP) {
				return iface.Name
			}
		}
	}
	return ""
}

// plain converts a gopsutil value to JSON-shaped data through its JSON
// tags (the names CCM's facts use); empty is returned when v is nil or
// cannot be converted.
func plain(v any, empty any) any {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return empty
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return empty
	}
	return numbers(out)
}

// numbers turns json.Number into int64 when whole, else float64.
func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return u
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

// Query returns the fact at a dotted path ("host.info.os",
// "network.interfaces.0.name"): keys through maps, indexes through lists.
// An empty path returns all facts.
func Query(facts map[string]any, path string) (any, bool) {
	if path == "" {
		return facts, true
	}
	return template.Walk(facts, strings.Split(path, "."))
}
