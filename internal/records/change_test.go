package records

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
)

// What a zone transfer loses and gains when a headless service changes is the same whether every
// record before and after is compared or only the change's: for thousands of random changes of
// endpoints, hostnames, slices and ports, small sets (whose SRV weights move) and large.
func TestChangeTransfersWhatEveryRecordTells(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	build := &Builder{TTL: 5}
	told := 0
	for round := range 3000 {
		old := randomSlices(rng, 1+rng.IntN(4), 1+rng.IntN(60))
		now := changeSlices(rng, old)
		oldSet := build.BuildService(headlessOf(old), "cluster.local.")
		nowSet := build.BuildService(headlessOf(now), "cluster.local.")
		if oldSet == nil || nowSet == nil {
			continue
		}
		change, ok := ChangeOf(oldSet, nowSet)
		if !ok {
			continue
		}
		told++
		before, after := change.TransferRecords()
		gotDeleted, gotAdded := difference(before, after)
		wantDeleted, wantAdded := difference(TransferRecords(nil, oldSet), TransferRecords(nil, nowSet))
		if !slices.Equal(gotDeleted, wantDeleted) || !slices.Equal(gotAdded, wantAdded) {
			t.Fatalf("round %d: the change's records tell\n deleted %q\n added %q\nevery record tells\n deleted %q\n added %q",
				round, gotDeleted, gotAdded, wantDeleted, wantAdded)
		}
		var addrs []netip.Addr
		change.Addrs(func(a netip.Addr) { addrs = append(addrs, a) })
		for _, text := range append(wantDeleted, wantAdded...) {
			rr, err := dns.NewRR(text)
			if err != nil {
				t.Fatal(err)
			}
			if a, ok := AddressOf(rr); ok && !slices.Contains(addrs, a) {
				t.Fatalf("round %d: %s changed, but its address is not among the change's %v", round, rr, addrs)
			}
		}
	}
	if told < 1500 {
		t.Errorf("only %d of 3000 changes told from their slices", told)
	}
}

// A set whose endpoints share a name, or a hostname spelled as an address, is compared record by
// record.
func TestChangeNeedsEndpointsOfTheirOwn(t *testing.T) {
	build := &Builder{TTL: 5}
	ports := []object.Port{{Name: "http", Protocol: "tcp", Port: 80}}
	ep := func(addr, host string) object.Endpoint {
		return object.Endpoint{Addr: netip.MustParseAddr(addr), Hostname: host}
	}
	base := object.NewEndpointSlice(ports, []object.Endpoint{ep("10.0.0.1", "a")})
	for _, tc := range []struct {
		rule string
		eps  []object.Endpoint
	}{
		{"two endpoints with one hostname", []object.Endpoint{ep("10.0.0.2", "b"), ep("10.0.0.3", "b")}},
		{"a hostname spelled as another's address", []object.Endpoint{ep("10.0.0.2", "10-0-0-3"), ep("10.0.0.3", "")}},
		{"an address twice", []object.Endpoint{ep("10.0.0.2", ""), ep("10.0.0.1", "")}},
	} {
		old := build.BuildService(headlessOf([]*object.EndpointSlice{base}), "cluster.local.")
		now := build.BuildService(headlessOf([]*object.EndpointSlice{base, object.NewEndpointSlice(ports, tc.eps)}), "cluster.local.")
		if _, ok := ChangeOf(old, now); ok {
			t.Errorf("%s: told from the slices", tc.rule)
		}
	}
}

func headlessOf(sls []*object.EndpointSlice) *object.Service {
	return &object.Service{Namespace: "ns", Name: "svc", Kind: object.Headless, Slices: sls}
}

// randomSlices are n slices of up to size endpoints, from a small pool of addresses, hostnames and
// ports, so that changes collide.
func randomSlices(rng *rand.Rand, n, size int) []*object.EndpointSlice {
	var out []*object.EndpointSlice
	for range n {
		out = append(out, randomSlice(rng, size))
	}
	return out
}

func randomSlice(rng *rand.Rand, size int) *object.EndpointSlice {
	var eps []object.Endpoint
	for range 1 + rng.IntN(size) {
		e := object.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(8)), byte(rng.IntN(250))})}
		if rng.IntN(4) == 0 {
			e.Addr = netip.AddrFrom16([16]byte{0xfd, 14: byte(rng.IntN(8)), 15: byte(rng.IntN(250))})
		}
		if rng.IntN(3) == 0 {
			e.Hostname = fmt.Sprintf("h%d", rng.IntN(2000))
		}
		eps = append(eps, e)
	}
	var ports []object.Port
	for _, p := range rng.Perm(4)[:rng.IntN(4)] {
		proto := []string{"tcp", "udp"}[rng.IntN(2)]
		ports = append(ports, object.Port{Name: fmt.Sprintf("p%d", p), Protocol: proto, Port: uint16(8000 + p + rng.IntN(2))})
	}
	return object.NewEndpointSlice(ports, eps)
}

// changeSlices is old changed as the API server changes a service's slices: one replaced by a
// copy with an endpoint changed, added or removed, or its ports changed; one added; one removed.
// The others are shared.
func changeSlices(rng *rand.Rand, old []*object.EndpointSlice) []*object.EndpointSlice {
	now := slices.Clone(old)
	i := rng.IntN(len(now))
	switch rng.IntN(6) {
	case 0:
		now = append(now, randomSlice(rng, 20))
	case 1:
		if len(now) > 1 {
			now = slices.Delete(now, i, i+1)
		}
	case 2: // its ports change, its endpoints stay
		ports := randomSlice(rng, 1).Ports
		now[i] = object.NewEndpointSlice(ports, now[i].Endpoints())
	default: // one endpoint changes, comes or goes
		eps := now[i].Endpoints()
		j := rng.IntN(len(eps))
		switch rng.IntN(3) {
		case 0:
			eps[j].Addr = netip.AddrFrom4([4]byte{10, 0, 2, byte(rng.IntN(250))})
		case 1:
			eps = append(eps, object.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 0, 3, byte(rng.IntN(250))})})
		case 2:
			if len(eps) > 1 {
				eps = slices.Delete(eps, j, j+1)
			}
		}
		now[i] = object.NewEndpointSlice(now[i].Ports, eps)
	}
	return now
}

// difference is what after has that before has not (added) and the other way round (deleted),
// each once, sorted.
func difference(before, after []dns.RR) (deleted, added []string) {
	was, is := map[string]bool{}, map[string]bool{}
	for _, rr := range before {
		was[rr.String()] = true
	}
	for _, rr := range after {
		is[rr.String()] = true
	}
	for s := range was {
		if !is[s] {
			deleted = append(deleted, s)
		}
	}
	for s := range is {
		if !was[s] {
			added = append(added, s)
		}
	}
	slices.Sort(deleted)
	slices.Sort(added)
	return deleted, added
}
