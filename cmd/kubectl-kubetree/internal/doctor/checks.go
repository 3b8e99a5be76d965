package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The sections of the Kubernetes DNS specification (schema 1.1.0,
// github.com/kubernetes/dns/blob/master/docs/specification.md) a check comes from; and the
// kubelet's part, which the specification leaves to "DNS for Services and Pods".
const (
	specVersion   = "spec 2.2 (schema version)"
	specA         = "spec 2.3.1 (ClusterIP A/AAAA)"
	specSRV       = "spec 2.3.2 (ClusterIP SRV)"
	specPTR       = "spec 2.3.3 (ClusterIP PTR)"
	specHeadlessA = "spec 2.4.1 (headless A/AAAA)"
	specHeadSRV   = "spec 2.4.2 (headless SRV)"
	specHeadPTR   = "spec 2.4.3 (headless PTR)"
	specCNAME     = "spec 2.5.1 (ExternalName CNAME)"
	kubeletDNS    = "kubelet ClusterFirst (DNS for Services and Pods)"
	nodeLocalDNS  = "NodeLocal DNSCache"
	serviceFront  = "the cluster DNS Service"
)

// SchemaVersion is the specification's schema the checks come from, which dns-version.<zone>
// must name.
const SchemaVersion = "1.1.0"

// Check is one thing the doctor checked, and what it found.
type Check struct {
	Name    string `json:"name"`
	Section string `json:"section"` // the specification's section, or what else it comes from
	Query   string `json:"query,omitempty"`
	Pass    bool   `json:"pass"`
	// Info marks a measurement: it neither passes nor fails the run.
	Info   bool   `json:"info,omitempty"`
	Detail string `json:"detail"`
}

// Resolver asks DNS from inside the doctor's client pod, through the pod's own resolv.conf.
type Resolver interface {
	// Lookup asks for name (relative names through the search path) and returns one line a record,
	// in dnsq's forms: an address; "PRIORITY WEIGHT PORT TARGET"; a name; a text.
	Lookup(ctx context.Context, qtype, name string) ([]string, error)
	// ResolvConf is the pod's /etc/resolv.conf.
	ResolvConf(ctx context.Context) (string, error)
}

// lookup is one record form the specification defines, asked as a client asks it.
type lookup struct {
	name, section, qtype, qname string
	want                        []string
}

// lookups are the record forms of the fixtures in f, asked by their full names (directly, no
// search path) and, where clients use them, by the short names the search path completes.
func lookups(f *fixtures, domain string, dns dnsService) []lookup {
	svcIn := func(name, ns string) string { return name + "." + ns + ".svc." + domain + "." }
	svc := func(name string) string { return svcIn(name, f.Namespace) }
	web, hl, host := svc(clusterIPName), svc(headlessName), hostname+"."+svc(headlessName)
	ls := []lookup{
		{"schema version", specVersion, "txt", "dns-version." + domain + ".", []string{SchemaVersion}},
		{"the cluster DNS Service's own name", specA, "a", svcIn(dns.Name, dns.Namespace), dns.ClusterIPs},
		{"ClusterIP service, full name", specA, "a", web, f.ClusterIPs},
		{"ClusterIP service, short name through the search path", specA, "a", clusterIPName, f.ClusterIPs},
		{"ClusterIP service, service.namespace through the search path", specA, "a", clusterIPName + "." + f.Namespace, f.ClusterIPs},
		{"ClusterIP service, SRV of a named TCP port", specSRV, "srv", "_http._tcp." + web, []string{"80 " + web}},
		{"ClusterIP service, SRV of a named UDP port", specSRV, "srv", "_syslog._udp." + web, []string{"514 " + web}},
		{"headless service, full name", specHeadlessA, "a", hl, []string{f.PodIP}},
		{"headless service, pod by hostname", specHeadlessA, "a", host, []string{f.PodIP}},
		{"headless service, hostname.subdomain through the search path", specHeadlessA, "a", hostname + "." + headlessName, []string{f.PodIP}},
		{"headless service, SRV of a named port", specHeadSRV, "srv", "_http._tcp." + hl, []string{"80 " + host}},
		{"headless service, PTR of the pod's address", specHeadPTR, "ptr", f.PodIP, []string{host}},
		{"ExternalName service, CNAME", specCNAME, "cname", svc(externalName), []string{web}},
	}
	for _, ip := range f.ClusterIPs {
		family := "IPv4"
		if strings.Contains(ip, ":") {
			family = "IPv6"
		}
		ls = append(ls, lookup{"ClusterIP service, PTR of its " + family + " address", specPTR, "ptr", ip, []string{web}})
	}
	return ls
}

// dnsService is the cluster DNS's Service as the doctor found it.
type dnsService struct {
	Namespace, Name string
	ClusterIPs      []string
	Ready           int // ready endpoints behind it
}

// askAgainAfter is the pause between two askings of a check that is not yet right. (A variable,
// so that the package's tests can make it short.)
var askAgainAfter = 2 * time.Second

// ask runs l through r, again until it answers as wanted or until converge passes: the DNS learns
// of the fixtures through its watch, a moment after the API server has them.
func ask(ctx context.Context, r Resolver, l lookup, converge time.Time) Check {
	c := Check{Name: l.name, Section: l.section, Query: strings.ToUpper(l.qtype) + " " + l.qname}
	want := slices.Sorted(slices.Values(l.want))
	for {
		got, err := r.Lookup(ctx, l.qtype, l.qname)
		if l.qtype == "srv" {
			got = portsAndTargets(got)
		}
		slices.Sort(got)
		switch {
		case err != nil:
			c.Detail = fmt.Sprintf("failed: %v; want %s", err, strings.Join(want, ", "))
		case slices.Equal(got, want):
			c.Pass, c.Detail = true, strings.Join(got, ", ")
			return c
		default:
			c.Detail = fmt.Sprintf("got %s, want %s", orNothing(got), strings.Join(want, ", "))
		}
		if time.Now().After(converge) || ctx.Err() != nil {
			return c
		}
		select {
		case <-ctx.Done():
			return c
		case <-time.After(askAgainAfter):
		}
	}
}

// portsAndTargets are the distinct ports and targets of SRV lines ("PRIORITY WEIGHT PORT
// TARGET"): what the specification fixes. Priority and weight it leaves to the implementation
// (CoreDNS's kubernetes plugin gives each of a dual-stack service's ClusterIPs a record of weight 50).
func portsAndTargets(lines []string) []string {
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 4 {
			l = f[2] + " " + f[3]
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func orNothing(s []string) string {
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", ")
}

// confChecks are the checks of the pod's resolv.conf: as the kubelet writes it, with the cluster
// DNS (or NodeLocal DNSCache) as its nameserver; and the queries one lookup of a name outside the
// cluster costs under it (a measurement).
func confChecks(text, ns, domain, nameserver string) []Check {
	rc := parseResolvConf(text)
	c := Check{Name: "resolv.conf as the kubelet writes it", Section: kubeletDNS}
	if bad := checkResolvConf(rc, ns, domain, nameserver); len(bad) > 0 {
		c.Detail = strings.Join(bad, "; ")
	} else {
		c.Pass, c.Detail = true, fmt.Sprintf("nameserver %s, search %s, ndots %d", nameserver, strings.Join(rc.Search, " "), rc.Ndots)
	}
	const external = "www.example.com" // two dots, as most names a pod asks outside the cluster
	cost := queriesPerLookup(rc, strings.Count(external, "."))
	amp := Check{Name: "queries one external lookup costs", Section: kubeletDNS, Query: "A/AAAA " + external, Info: true,
		Detail: fmt.Sprintf("%d queries (%d search domains, then the name, each for A and AAAA, ndots %d); a trailing dot (%s.) costs 2", cost, len(rc.Search), rc.Ndots, external)}
	return []Check{c, amp}
}

// frontCheck is the check that the DNS Service has ready endpoints: without them every query times out.
func frontCheck(d dnsService) Check {
	c := Check{Name: "the DNS Service has ready endpoints", Section: serviceFront, Pass: d.Ready > 0}
	endpoints := "endpoints"
	if d.Ready == 1 {
		endpoints = "endpoint"
	}
	c.Detail = fmt.Sprintf("%s/%s at %s: %d ready %s", d.Namespace, d.Name, strings.Join(d.ClusterIPs, ", "), d.Ready, endpoints)
	if d.Ready == 0 {
		c.Detail += ": no DNS pod is ready behind it (is the DNS Deployment scaled to zero, or are its pods failing?)"
	}
	return c
}

// cacheCheck, behind NodeLocal DNSCache, asks the cluster DNS itself (through direct, past the
// cache at cache) each lookup of ls that failed through the cache (checks, one per lookup): one that
// the cluster DNS at upstream answers as wanted is the cache's fault, its upstream blocked or the
// cache down.
func cacheCheck(ctx context.Context, checks []Check, ls []lookup, direct Resolver, cache, upstream string) Check {
	c := Check{Name: "NodeLocal DNSCache answers as the cluster DNS does", Section: nodeLocalDNS}
	var cacheFails []string
	failed := 0
	for i, l := range ls {
		if checks[i].Pass {
			continue
		}
		failed++
		if past := ask(ctx, direct, l, time.Now()); past.Pass {
			cacheFails = append(cacheFails, l.qname)
		}
	}
	switch {
	case len(cacheFails) > 0:
		names := strings.Join(cacheFails[:min(3, len(cacheFails))], ", ")
		if len(cacheFails) > 3 {
			names += fmt.Sprintf(" and %d more", len(cacheFails)-3)
		}
		c.Detail = fmt.Sprintf("%d lookups fail through the cache at %s that the cluster DNS at %s answers (%s): the cache's upstream is blocked, or the cache is down",
			len(cacheFails), cache, upstream, names)
	case failed > 0:
		c.Pass, c.Detail = true, fmt.Sprintf("the %d lookups that fail through the cache at %s fail at the cluster DNS at %s too", failed, cache, upstream)
	default:
		c.Pass, c.Detail = true, fmt.Sprintf("every lookup through the cache at %s answered as wanted", cache)
	}
	return c
}
