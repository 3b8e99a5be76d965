package kubetree

import (
	"net"
	"net/netip"

	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/object"
	"github.com/kubetree/kubetree/internal/tree"

	"github.com/miekg/dns"
)

// AutoPath implements autopath.AutoPather for `autopath @kubetree`: the search path of the pod that
// sent the query, so that the autopath plugin can try the pod's namespace, svc.<zone> and <zone>,
// then the host's search path, and answer in one round trip what the pod's resolver would have
// asked in several. nil, when the query is not in a forward zone of ours or its client is not one
// known pod: autopath then does nothing.
func (k *Kubetree) AutoPath(state request.Request) []string {
	if k.pods == nil {
		return nil
	}
	i := tree.MatchZone(k.Zones, state.Name())
	if i < 0 || k.zones[i].reverse {
		return nil
	}
	p := k.clientPod(state)
	if p == nil {
		return nil
	}
	for f, z := range k.forward {
		if z == k.zones[i].name {
			return k.searchPaths(p.Identity.Namespace)[f]
		}
	}
	return nil
}

// searchPaths returns a namespace's search paths, one per forward zone, as the in-tree plugin's
// autopath builds them: <ns>.svc.<zone>, svc.<zone>, <zone>, the host's search path, and "" (the
// name as asked). Made once per namespace; autopath only reads them.
func (k *Kubetree) searchPaths(ns string) [][]string {
	k.searchesMu.RLock()
	s, ok := k.searches[ns]
	k.searchesMu.RUnlock()
	if ok {
		return s
	}
	out := make([][]string, len(k.forward))
	for i, zone := range k.forward {
		path := []string{ns + ".svc." + zone, "svc." + zone, zone}
		path = append(path, k.hostSearch...)
		out[i] = append(path, "")
	}
	k.searchesMu.Lock()
	defer k.searchesMu.Unlock()
	if s, ok := k.searches[ns]; ok {
		return s
	}
	if k.searches == nil {
		k.searches = map[string][][]string{}
	}
	k.searches[ns] = out
	return out
}

// clientPod returns the pod that sent the query: the one pod with the query's source address, or,
// when the query comes through a source that client_subnet_from trusts, with the address in its
// EDNS0 client-subnet option.
func (k *Kubetree) clientPod(state request.Request) *object.StoredPod {
	if k.pods == nil {
		return nil
	}
	addr, ok := sourceAddr(state.W.RemoteAddr())
	if !ok {
		return nil
	}
	if k.trusted(addr) {
		if ecs, ok := clientSubnet(state.Req); ok {
			addr = ecs
		}
	}
	return k.pods.ClientAt(addr)
}

func (k *Kubetree) trusted(addr netip.Addr) bool {
	for _, p := range k.cfg.clientSubnetFrom {
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
