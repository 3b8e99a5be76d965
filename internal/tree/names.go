package tree

import (
	"slices"
	"strings"
)

// Names as the plugin handles them: zones and everything written into the tree are lower case and
// fully qualified; query names arrive in any case and are compared without allocating.

// MatchZone returns the index of the longest of zones (lower case) that qname, in any case, is
// in; -1 if none. It does not allocate.
func MatchZone(zones []string, qname string) int {
	best := -1
	for i, z := range zones {
		if best >= 0 && len(z) <= len(zones[best]) || len(z) > len(qname) {
			continue
		}
		off := len(qname) - len(z)
		if off > 0 && (qname[off-1] != '.' || escaped(qname, off-1)) {
			continue // a\.cluster.local. is in local., not cluster.local.
		}
		if EqualFold(qname[off:], z) {
			best = i
		}
	}
	return best
}

// IsReverseZone reports whether zone is an in-addr.arpa or ip6.arpa zone, the bare in-addr.arpa.
// and ip6.arpa. included (dnsutil.IsReverse does not count those).
func IsReverseZone(zone string) bool {
	return strings.HasSuffix(zone, "in-addr.arpa.") || strings.HasSuffix(zone, "ip6.arpa.")
}

// inZone reports whether name (lower case, fully qualified) is zone or below it.
func inZone(name, zone string) bool {
	if !strings.HasSuffix(name, zone) {
		return false
	}
	cut := len(name) - len(zone)
	return cut == 0 || zone == "." || name[cut-1] == '.' && !escaped(name, cut-1)
}

// labelsBelow returns the labels of name (in zone) below zone, the one next to the apex first.
func labelsBelow(name, zone string) []string {
	rel := strings.TrimSuffix(name[:len(name)-len(zone)], ".")
	if zone == "." {
		rel = strings.TrimSuffix(name, ".")
	}
	if rel == "" {
		return nil
	}
	labels, _ := SplitLabels(make([]string, 0, strings.Count(rel, ".")+1), rel+".")
	slices.Reverse(labels)
	return labels
}

// escaped reports whether s[i] is escaped by the backslashes before it: the dot in a\.b is part of
// the label, the one in a\\.b ends it.
func escaped(s string, i int) bool {
	n := 0
	for i > n && s[i-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}

// EqualFold reports whether a, in any case, equals b, which is lower case.
func EqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// HasUpper reports whether s has an ASCII upper-case letter.
func HasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// LowerInto appends s to dst with ASCII letters in lower case.
func LowerInto(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// SplitLabels appends the labels of name (with its trailing dot) to dst, up to its capacity; ok is
// false when name has more.
func SplitLabels(dst []string, name string) (_ []string, ok bool) {
	for name != "" {
		if len(dst) == cap(dst) {
			return dst, false
		}
		i := 0
		for i < len(name) && (name[i] != '.' || escaped(name, i)) {
			i++
		}
		dst = append(dst, name[:i])
		name = name[min(i+1, len(name)):]
	}
	return dst, true
}

// CutSuffixFold is strings.CutSuffix ignoring ASCII case, for a suffix that starts a label.
func CutSuffixFold(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || !EqualFold(s[len(s)-len(suffix):], suffix) {
		return s, false
	}
	before := s[:len(s)-len(suffix)]
	if before != "" && before[len(before)-1] != '.' {
		return s, false
	}
	return before, true
}
