package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// connectedClient asks over one connected UDP socket that it keeps for every lookup, as a pooled
// resolver does (Envoy's c-ares, a client library's connection pool): the socket's conntrack
// entry lives as long as it is used, so it leads to the DNS pod its first query went to until
// kube-proxy deletes it. Go's resolver and glibc's open a socket per lookup instead. It asks
// resolv.conf's first nameserver for the name as given (a full name: no search list), and asks
// again on the same socket after resolv.conf's timeout, as many times as its attempts say.
type connectedClient struct {
	conn     *net.UDPConn
	timeout  time.Duration
	attempts int
	id       uint16
	buf      []byte
}

// resolvConf is what the connected client takes of /etc/resolv.conf.
type resolvConf struct {
	nameserver string
	timeout    time.Duration
	attempts   int
}

// readResolvConf reads path as the pod's resolver does: the first nameserver, options timeout:N
// and attempts:N, 5 s and 2 by default.
func readResolvConf(path string) (resolvConf, error) {
	conf := resolvConf{timeout: 5 * time.Second, attempts: 2}
	f, err := os.Open(path)
	if err != nil {
		return conf, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if conf.nameserver == "" {
				conf.nameserver = fields[1]
			}
		case "options":
			for _, o := range fields[1:] {
				key, value, _ := strings.Cut(o, ":")
				n, err := strconv.Atoi(value)
				switch {
				case err != nil || n < 1:
				case key == "timeout":
					conf.timeout = time.Duration(n) * time.Second
				case key == "attempts":
					conf.attempts = n
				}
			}
		}
	}
	if conf.nameserver == "" {
		return conf, fmt.Errorf("%s names no nameserver", path)
	}
	return conf, sc.Err()
}

func newConnectedClient(conf resolvConf) (*connectedClient, error) {
	addr, err := netip.ParseAddr(conf.nameserver)
	if err != nil {
		return nil, fmt.Errorf("nameserver %q: %w", conf.nameserver, err)
	}
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 53)))
	if err != nil {
		return nil, err
	}
	return &connectedClient{conn: conn, timeout: conf.timeout, attempts: conf.attempts, id: uint16(time.Now().UnixNano()), buf: make([]byte, 65535)}, nil
}

// lookup answers as lookup does for typ (a: the A and the AAAA addresses; srv, ptr, cname, txt).
func (c *connectedClient) lookup(typ, name string) ([]string, error) {
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	switch typ {
	case "a":
		a, err := c.ask(name, dnsmessage.TypeA)
		if err != nil {
			return nil, err
		}
		aaaa, err := c.ask(name, dnsmessage.TypeAAAA)
		if err != nil {
			return nil, err
		}
		if len(a)+len(aaaa) == 0 {
			return nil, fmt.Errorf("lookup %s: no addresses", name)
		}
		return append(a, aaaa...), nil
	case "srv":
		return c.ask(name, dnsmessage.TypeSRV)
	case "ptr":
		addr, err := netip.ParseAddr(strings.TrimSuffix(name, "."))
		if err != nil {
			return nil, err
		}
		return c.ask(reverseName(addr), dnsmessage.TypePTR)
	case "cname":
		return c.ask(name, dnsmessage.TypeCNAME)
	case "txt":
		return c.ask(name, dnsmessage.TypeTXT)
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

// errNXDOMAIN is a lookup of a name that does not exist.
var errNXDOMAIN = errors.New("no such host")

// ask sends one question and reads until its answer comes (an answer to an earlier, timed-out
// question is skipped, as resolvers do), asking again after each timeout.
func (c *connectedClient) ask(name string, qtype dnsmessage.Type) ([]string, error) {
	c.id++
	q, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, err
	}
	msg := dnsmessage.Message{Header: dnsmessage.Header{ID: c.id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: q, Type: qtype, Class: dnsmessage.ClassINET}}}
	packed, err := msg.Pack()
	if err != nil {
		return nil, err
	}
	for try := 0; try < c.attempts; try++ {
		if _, err := c.conn.Write(packed); err != nil {
			return nil, err
		}
		c.conn.SetReadDeadline(time.Now().Add(c.timeout))
		for {
			n, err := c.conn.Read(c.buf)
			if err != nil {
				break // timed out (or refused): ask again
			}
			var reply dnsmessage.Message
			if reply.Unpack(c.buf[:n]) != nil || reply.ID != c.id || len(reply.Questions) != 1 || reply.Questions[0].Type != qtype {
				continue
			}
			return records(&reply, name)
		}
	}
	return nil, fmt.Errorf("lookup %s %s: no answer after %d tries of %s", name, qtype, c.attempts, c.timeout)
}

// records are the reply's answers, one line each as lookup prints them.
func records(reply *dnsmessage.Message, name string) ([]string, error) {
	switch reply.RCode {
	case dnsmessage.RCodeSuccess:
	case dnsmessage.RCodeNameError:
		return nil, fmt.Errorf("lookup %s: %w", name, errNXDOMAIN)
	default:
		return nil, fmt.Errorf("lookup %s: %s", name, reply.RCode)
	}
	var out []string
	for _, rr := range reply.Answers {
		switch b := rr.Body.(type) {
		case *dnsmessage.AResource:
			out = append(out, netip.AddrFrom4(b.A).String())
		case *dnsmessage.AAAAResource:
			out = append(out, netip.AddrFrom16(b.AAAA).String())
		case *dnsmessage.SRVResource:
			out = append(out, fmt.Sprintf("%d %d %d %s", b.Priority, b.Weight, b.Port, b.Target))
		case *dnsmessage.PTRResource:
			out = append(out, b.PTR.String())
		case *dnsmessage.CNAMEResource:
			if rr.Header.Type == reply.Questions[0].Type {
				out = append(out, b.CNAME.String())
			}
		case *dnsmessage.TXTResource:
			out = append(out, strings.Join(b.TXT, ""))
		}
	}
	return out, nil
}

// reverseName is addr's name under in-addr.arpa or ip6.arpa.
func reverseName(addr netip.Addr) string {
	var b strings.Builder
	if addr.Is4() {
		a := addr.As4()
		for i := 3; i >= 0; i-- {
			fmt.Fprintf(&b, "%d.", a[i])
		}
		return b.String() + "in-addr.arpa."
	}
	a := addr.As16()
	for i := 15; i >= 0; i-- {
		fmt.Fprintf(&b, "%x.%x.", a[i]&0xf, a[i]>>4)
	}
	return b.String() + "ip6.arpa."
}
