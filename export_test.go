package kubetree

import "github.com/kubetree/kubetree/internal/probe"

// What the root's external tests (package kubetree_test) reach of this package beyond TestParts:
// they build the plugin through internal/plugintest, which imports this package, so they cannot
// be of it.

// SetProber makes p the prober that Ready asks, as setup does with the probe option's.
func SetProber(k *Kubetree, p *probe.Prober) { k.probe = p }

// Prober is the prober that Ready asks: nil until setup makes one.
func Prober(k *Kubetree) *probe.Prober { return k.probe }

// SearchPathsHeld is how many namespaces' search paths autopath holds.
func SearchPathsHeld(k *Kubetree) int {
	k.searchesMu.RLock()
	defer k.searchesMu.RUnlock()
	return len(k.searches)
}

// MinSearchesSweep is how many namespaces' search paths autopath keeps before its first sweep..
const MinSearchesSweep = minSearchesSweep
