package facts

import (
	"net"
	"testing"

	gnet "github.com/shirou/gopsutil/v4/net"
)

// BenchmarkNetworkFacts: the network facts (interfaces, addresses,
// default routes' interfaces) gathered once.
func BenchmarkNetworkFacts(b *testing.B) {
	for b.Loop() {
		network(b.Context())
	}
}

// TestDefaultInterfaceFromGatheredInterfaces: the interface holding the
// address the kernel picks is found among the interfaces gopsutil read,
// by their "address/prefix" entries; it is the one net.Interfaces names.
func TestDefaultInterfaceFromGatheredInterfaces(t *testing.T) {
	ifaces := gnet.InterfaceStatList{
		{Name: "eth9", Addrs: gnet.InterfaceAddrList{{Addr: "10.9.9.9/8"}, {Addr: "127.0.0.1"}}}, // no prefix: not an IPNet
		{Name: "lo9", Addrs: gnet.InterfaceAddrList{{Addr: "127.0.0.1/8"}}},
	}
	if got := defaultInterface(t.Context(), ifaces, "udp4", "127.0.0.1:53"); got != "lo9" {
		t.Errorf("route to 127.0.0.1: %q, want lo9", got)
	}
	if got := defaultInterface(t.Context(), ifaces[:1], "udp4", "127.0.0.1:53"); got != "" {
		t.Errorf("no interface holds 127.0.0.1/8: %q, want none", got)
	}
	if got := defaultInterface(t.Context(), ifaces, "udp4", "not an address"); got != "" {
		t.Errorf("a dial that fails: %q, want none", got)
	}

	// On this host, as net.Interfaces and Addrs name it.
	real, err := gnet.InterfacesWithContext(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range []struct{ network, addr string }{{"udp4", "192.0.2.1:53"}, {"udp6", "[2001:db8::1]:53"}} {
		want := ""
		if conn, err := net.Dial(route.network, route.addr); err == nil {
			local := conn.LocalAddr().(*net.UDPAddr).IP
			conn.Close()
			all, _ := net.Interfaces()
			for _, iface := range all {
				addrs, _ := iface.Addrs()
				for _, a := range addrs {
					if n, ok := a.(*net.IPNet); ok && n.IP.Equal(local) && want == "" {
						want = iface.Name
					}
				}
			}
		}
		if got := defaultInterface(t.Context(), real, route.network, route.addr); got != want {
			t.Errorf("%s %s: %q, net.Interfaces says %q", route.network, route.addr, got, want)
		}
	}
}
