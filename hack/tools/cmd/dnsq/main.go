// Command dnsq resolves names the way a Go program in a pod does: through the pod's
// /etc/resolv.conf (nameserver, search list, ndots), with the pure Go resolver. It is the
// client image of the local node (a static glibc busybox's nslookup/wget crash in a pod: NSS).
//
//	dnsq NAME                 A/AAAA (search list applied)
//	dnsq -t srv NAME          SRV, e.g. _dns._udp.kube-dns.kube-system
//	dnsq -t ptr ADDRESS       PTR
//	dnsq -t cname NAME        the canonical name
//	dnsq -t txt NAME          TXT
//	dnsq -t ns ZONE           the zone's nameservers
//	dnsq -t conf              print /etc/resolv.conf (the image has no cat)
//	dnsq -t sleep             sleep forever (the pod's main process; queries come by kubectl exec)
//	dnsq -t loop CASE...      ask every CASE again and again, over UDP and TCP in turn (-client:
//	                          udp, tcp, or udp-connected, one socket kept: connected.go; -every:
//	                          a lookup at most every DURATION), until
//	                          stdin closes (with -until NAME: until NAME resolves); then print
//	                          a JSON summary (loop.go)
//
// One line per record on stdout; exit 1 and the error on stderr if the lookup fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"
)

func main() {
	typ := flag.String("t", "a", "query type: a, srv, ptr, cname, txt, ns, conf, sleep, loop")
	timeout := flag.Duration("timeout", 10*time.Second, "give up after this long")
	until := flag.String("until", "", "with -t loop: stop once this name resolves, not when stdin closes (a loop that is a pod's main process)")
	every := flag.Duration("every", 0, "with -t loop: start a lookup at most every this long (0: one after the other, without pause)")
	client := flag.String("client", "mixed", "with -t loop: mixed (UDP and TCP in turn), udp (a socket per lookup, as Go's resolver and glibc), tcp, or udp-connected (one connected socket for every lookup, as a pooled resolver; full names only)")
	flag.Parse()
	if *typ == "sleep" {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		return
	}
	if *typ == "loop" {
		switch *client {
		case "mixed", "udp", "tcp", "udp-connected":
		default:
			fmt.Fprintf(os.Stderr, "-client %q: want mixed, udp, tcp or udp-connected\n", *client)
			os.Exit(2)
		}
		if err := loop(flag.Args(), os.Stdin, *until, *client, *every, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return
	}
	if *typ == "conf" {
		b, err := os.ReadFile("/etc/resolv.conf")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: dnsq [-t a|srv|ptr|cname|txt|ns] NAME")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	lines, err := lookup(ctx, &net.Resolver{PreferGo: true}, *typ, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

func lookup(ctx context.Context, r *net.Resolver, typ, name string) ([]string, error) {
	var out []string
	switch typ {
	case "a":
		addrs, err := r.LookupHost(ctx, name)
		if err != nil {
			return nil, err
		}
		return addrs, nil
	case "srv":
		_, srvs, err := r.LookupSRV(ctx, "", "", name)
		if err != nil {
			return nil, err
		}
		for _, s := range srvs {
			out = append(out, fmt.Sprintf("%d %d %d %s", s.Priority, s.Weight, s.Port, s.Target))
		}
	case "ptr":
		names, err := r.LookupAddr(ctx, name)
		if err != nil {
			return nil, err
		}
		out = names
	case "cname":
		c, err := r.LookupCNAME(ctx, name)
		if err != nil {
			return nil, err
		}
		out = []string{c}
	case "ns":
		nss, err := r.LookupNS(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, ns := range nss {
			out = append(out, ns.Host)
		}
	case "txt":
		txts, err := r.LookupTXT(ctx, name)
		if err != nil {
			return nil, err
		}
		out = txts
	default:
		return nil, fmt.Errorf("unknown type %q", typ)
	}
	return out, nil
}
