package records

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/kubetree/kubetree/internal/object"

	"github.com/miekg/dns"
)

// headless is a headless service of slices × endpoints ready endpoints (10.<slice>.x.y, with
// hostnames when named), each slice with the same ports named p0, p1, ... (TCP).
func headless(slices, endpoints, ports int, named bool) *ServiceSet {
	var ps []object.Port
	for p := range ports {
		ps = append(ps, object.Port{Name: fmt.Sprintf("p%d", p), Protocol: "tcp", Port: uint16(8000 + p)})
	}
	svc := &object.Service{Namespace: "ns", Name: "big", Kind: object.Headless}
	for s := range slices {
		var eps []object.Endpoint
		for e := range endpoints {
			ep := object.Endpoint{Addr: netip.AddrFrom4([4]byte{10, byte(s), byte(e >> 8), byte(e)})}
			if named {
				ep.Hostname = fmt.Sprintf("host-%d-%d", s, e)
			}
			eps = append(eps, ep)
		}
		svc.Slices = append(svc.Slices, object.NewEndpointSlice(ps, eps))
	}
	return (&Builder{TTL: 5}).BuildService(svc, "cluster.local.")
}

// reply is what a client gets of found over a transport of size bytes: the message CoreDNS's
// server writes after cutting it to size.
func reply(found Reply, size int) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion("big.ns.svc.cluster.local.", dns.TypeSRV)
	m.Response, m.Truncated = true, found.Truncated
	m.Answer, m.Extra = found.Answer, found.Extra
	m.Truncate(size)
	return m
}

// A reply is made only up to what its transport carries, and the client gets what it got when
// every record was made and the server cut the reply: the same records, the same weights, TC set.
func TestAReplyIsMadeUpToWhatItsTransportCarries(t *testing.T) {
	huge := headless(2, 500, 20, false) // 20,000 SRV records at the service's name
	small := headless(1, 3, 2, true)
	for _, tc := range []struct {
		name      string
		set       *ServiceSet
		rest      string
		qtype     uint16
		size      int
		truncated bool
	}{
		{"SRV of a huge service over UDP", huge, "", dns.TypeSRV, dns.MinMsgSize, true},
		{"SRV of a huge service over EDNS0 UDP", huge, "", dns.TypeSRV, 1232, true},
		{"SRV of a huge service over TCP", huge, "", dns.TypeSRV, dns.MaxMsgSize, true},
		{"SRV of one port of a huge service over TCP", huge, "_p3._tcp.", dns.TypeSRV, dns.MaxMsgSize, false},
		{"SRV of one port of a huge service over UDP", huge, "_p3._tcp.", dns.TypeSRV, dns.MinMsgSize, true},
		{"A of a huge service over UDP", huge, "", dns.TypeA, dns.MinMsgSize, true},
		{"A of a huge service over TCP", huge, "", dns.TypeA, dns.MaxMsgSize, false},
		{"SRV of a small service over UDP", small, "", dns.TypeSRV, dns.MinMsgSize, false},
		{"A of a small service over UDP", small, "", dns.TypeA, dns.MinMsgSize, false},
		{"SRV at an endpoint of a small service over UDP", small, "host-0-1.", dns.TypeSRV, dns.MinMsgSize, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := tc.rest + tc.set.Name()
			whole := tc.set.Answer(owner, tc.rest, tc.qtype, Client{}, Unlimited)
			cut := tc.set.Answer(owner, tc.rest, tc.qtype, Client{}, RoomFor(tc.size))
			if whole.Truncated {
				t.Fatal("every record made, yet truncated")
			}
			if room := RoomFor(tc.size); len(cut.Answer)+len(cut.Extra) > room {
				t.Errorf("%d records made, room for %d", len(cut.Answer)+len(cut.Extra), room)
			}
			if cut.Truncated != tc.truncated {
				t.Errorf("truncated %v, want %v (%d of %d answer records made)", cut.Truncated, tc.truncated, len(cut.Answer), len(whole.Answer))
			}
			got, want := reply(cut, tc.size), reply(whole, tc.size)
			if got.Truncated != want.Truncated {
				t.Errorf("the client gets TC %v, where every record made gives %v", got.Truncated, want.Truncated)
			}
			if g, w := texts(got.Answer), texts(want.Answer); !slices.Equal(g, w) {
				t.Errorf("the client gets %d answer records, %d when every record is made; first differing: %v",
					len(g), len(w), firstDiff(g, w))
			}
			if g, w := texts(got.Extra), texts(want.Extra); !slices.Equal(g, w) {
				t.Errorf("the client gets %d additional records, %d when every record is made; first differing: %v",
					len(g), len(w), firstDiff(g, w))
			}
		})
	}
}

// Additional data that does not fit leaves the answer whole: no TC (RFC 2181, section 9).
func TestLeftOutAdditionalDataIsNotTruncation(t *testing.T) {
	set := headless(1, 20, 1, true) // 20 SRV records, 20 target addresses
	found := set.Answer(set.Name(), "", dns.TypeSRV, Client{}, 30)
	if len(found.Answer) != 20 || len(found.Extra) != 10 {
		t.Fatalf("%d answer and %d additional records, want 20 and 10", len(found.Answer), len(found.Extra))
	}
	if found.Truncated {
		t.Error("truncated, where only additional data was left out")
	}
}

// The work of one query no longer grows with endpoints × ports: a service 25 times the size
// costs about the same to answer.
func TestAnswerWorkIsBoundedByTheReply(t *testing.T) {
	allocs := func(set *ServiceSet) float64 {
		return testing.AllocsPerRun(3, func() {
			set.Answer(set.Name(), "", dns.TypeSRV, Client{}, RoomFor(dns.MaxMsgSize))
		})
	}
	small, huge := allocs(headless(1, 500, 20, false)), allocs(headless(5, 1000, 100, false))
	if huge > 2*small {
		t.Errorf("an SRV answer of 500,000 records costs %.0f allocations, one of 10,000 %.0f: the work grows with the service", huge, small)
	}
}

func texts(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return a[i] + " / " + b[i]
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d / %d)", len(a), len(b))
}

// kubetree_external's answers from a headless service's endpoints are made up to the room too.
func TestExternalRepliesAreMadeUpToWhatTheirTransportCarries(t *testing.T) {
	set := headless(2, 500, 20, true)
	for _, size := range []int{dns.MinMsgSize, dns.MaxMsgSize} {
		ask := func(room int) Reply {
			q := &ExternalQuery{Owner: "big.ns.example.org.", Target: "big.ns.example.org.", Qtype: dns.TypeSRV, TTL: 5, Headless: true, Room: room}
			found, _ := set.ExternalRecords(q)
			return found
		}
		whole, cut := ask(0), ask(RoomFor(size))
		if len(cut.Answer)+len(cut.Extra) > RoomFor(size) || !cut.Truncated || whole.Truncated {
			t.Errorf("%d bytes: %d records made for room of %d, truncated %v (every record: %v)", size, len(cut.Answer)+len(cut.Extra), RoomFor(size), cut.Truncated, whole.Truncated)
		}
		got, want := reply(cut, size), reply(whole, size)
		if g, w := texts(got.Answer), texts(want.Answer); !slices.Equal(g, w) {
			t.Errorf("%d bytes: the client gets %d answer records, %d when every record is made; first differing: %v", size, len(g), len(w), firstDiff(g, w))
		}
	}
}
