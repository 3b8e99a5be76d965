package records

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/kubetree/kubetree/internal/object"
)

// TestHasDuplicates: the pairwise comparison of small services says what the maps of large ones
// say, over random services of up to smallService endpoints with repeated addresses and hostnames.
func TestHasDuplicates(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	found := 0
	for range 20000 {
		var slices []*object.EndpointSlice
		n := 0
		for range 1 + r.IntN(3) {
			var eps []object.Endpoint
			for range r.IntN(smallService/3 + 1) {
				e := object.Endpoint{Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(60))})}
				if r.IntN(2) == 0 {
					e.Hostname = fmt.Sprint("h", r.IntN(20))
				}
				eps = append(eps, e)
			}
			n += len(eps)
			slices = append(slices, object.NewEndpointSlice(nil, eps))
		}
		small, large := hasDuplicatesSmall(slices), hasDuplicatesLarge(slices, n)
		if small != large {
			t.Fatalf("pairwise %v, maps %v, for %d slices of %d endpoints", small, large, len(slices), n)
		}
		if small {
			found++
		}
	}
	if found == 0 || found == 20000 {
		t.Errorf("%d of 20000 services had duplicates; the test needs both kinds", found)
	}
}
