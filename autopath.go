package kubetree

import (
	"github.com/coredns/coredns/request"

	"github.com/kubetree/kubetree/internal/tree"
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
	if i < 0 || k.zones[i].Reverse {
		return nil
	}
	p := k.query.ClientPod(state)
	if p == nil {
		return nil
	}
	for f, z := range k.forward {
		if z == k.zones[i].Name {
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
	if len(k.searches) >= k.searchesSwept {
		k.sweepSearches()
	}
	k.searches[ns] = out
	return out
}

// minSearchesSweep is how many namespaces' search paths are kept before the first sweep.
const minSearchesSweep = 256

// sweepSearches forgets the search paths of namespaces that are no longer served (deleted, or
// left out by namespaces or namespace_labels), and sets the next sweep for when the map has
// doubled: it holds at most twice the namespaces served at the last sweep, or minSearchesSweep,
// and the sweeps' cost is spread over the namespaces added. A namespace that is not served, but
// whose pods ask, has its paths made again after a sweep. Called with searchesMu held.
func (k *Kubetree) sweepSearches() {
	zone := k.forward[0]
	for ns := range k.searches {
		if k.tree.Get(zone, ns+".svc."+zone) == nil {
			delete(k.searches, ns)
		}
	}
	k.searchesSwept = max(2*len(k.searches), minSearchesSweep)
}
