package query

import (
	"net"
	"net/netip"

	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
)

// ClientPod returns the pod that sent the query: the one pod with the query's source address, or,
// when the query comes through a source that client_subnet_from trusts, with the address in its
// EDNS0 client-subnet option.
func (a *Answerer) ClientPod(state request.Request) *object.StoredPod {
	if a.Pods == nil {
		return nil
	}
	addr, ok := sourceAddr(state.W.RemoteAddr())
	if !ok {
		return nil
	}
	if a.trusted(addr) {
		if ecs, ok := clientSubnet(state.Req); ok {
			addr = ecs
		}
	}
	return a.Pods.ClientAt(addr)
}

// trusted reports whether client_subnet_from trusts a query's source to name its client.
func (a *Answerer) trusted(addr netip.Addr) bool {
	for _, p := range a.ClientSubnetFrom {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// sourceAddr is the address a query came from, without allocating.
func sourceAddr(a net.Addr) (netip.Addr, bool) {
	var ip net.IP
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.IP
	case *net.TCPAddr:
		ip = a.IP
	default:
		return netip.Addr{}, false
	}
	addr, ok := netip.AddrFromSlice(ip)
	return addr.Unmap(), ok
}

// clientSubnet returns the whole address of an EDNS0 client-subnet option: a /32 or /128 source
// prefix names one client; a shorter one (a network) names none.
func clientSubnet(r *dns.Msg) (netip.Addr, bool) {
	opt := r.IsEdns0()
	if opt == nil {
		return netip.Addr{}, false
	}
	for _, o := range opt.Option {
		s, ok := o.(*dns.EDNS0_SUBNET)
		if !ok {
			continue
		}
		addr, ok := netip.AddrFromSlice(s.Address)
		if !ok {
			return netip.Addr{}, false
		}
		switch {
		case s.Family == 1 && s.SourceNetmask == 32 && addr.Unmap().Is4():
			return addr.Unmap(), true
		case s.Family == 2 && s.SourceNetmask == 128 && addr.Is6() && !addr.Is4In6():
			return addr, true
		}
		return netip.Addr{}, false
	}
	return netip.Addr{}, false
}
