package main

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeServer answers A and AAAA questions for web.test. on a loopback UDP socket, drops the first
// `drop` questions it gets, and records the address of every question's sender.
type fakeServer struct {
	conn    *net.UDPConn
	drop    int
	senders chan netip.AddrPort
}

func startFakeServer(t *testing.T, drop int) *fakeServer {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s := &fakeServer{conn: conn, drop: drop, senders: make(chan netip.AddrPort, 100)}
	go s.serve()
	return s
}

func (s *fakeServer) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		s.senders <- from
		if s.drop > 0 {
			s.drop--
			continue
		}
		var q dnsmessage.Message
		if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
			continue
		}
		reply := dnsmessage.Message{Header: dnsmessage.Header{ID: q.ID, Response: true, Authoritative: true}, Questions: q.Questions}
		question := q.Questions[0]
		hdr := dnsmessage.ResourceHeader{Name: question.Name, Type: question.Type, Class: dnsmessage.ClassINET, TTL: 5}
		switch {
		case question.Name.String() != "web.test.":
			reply.RCode = dnsmessage.RCodeNameError
		case question.Type == dnsmessage.TypeA:
			reply.Answers = []dnsmessage.Resource{{Header: hdr, Body: &dnsmessage.AResource{A: [4]byte{10, 96, 0, 7}}}}
		case question.Type == dnsmessage.TypeAAAA:
			reply.Answers = []dnsmessage.Resource{{Header: hdr, Body: &dnsmessage.AAAAResource{AAAA: netip.MustParseAddr("fd00::7").As16()}}}
		}
		packed, _ := reply.Pack()
		s.conn.WriteToUDPAddrPort(packed, from)
	}
}

func (s *fakeServer) client(t *testing.T, timeout time.Duration) *connectedClient {
	t.Helper()
	addr := s.conn.LocalAddr().(*net.UDPAddr)
	c, err := newConnectedClient(resolvConf{nameserver: addr.IP.String(), timeout: timeout, attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	// The fake listens on a port of its own, not 53.
	c.conn.Close()
	if c.conn, err = net.DialUDP("udp", nil, addr); err != nil {
		t.Fatal(err)
	}
	return c
}

// A pooled client keeps one socket: every question of every lookup comes from the same source
// address, so all of them follow one conntrack entry.
func TestConnectedClientAsksEveryLookupFromOneSocket(t *testing.T) {
	s := startFakeServer(t, 0)
	c := s.client(t, time.Second)
	for range 3 {
		got, err := c.lookup("a", "web.test")
		if err != nil || !slices.Equal(got, []string{"10.96.0.7", "fd00::7"}) {
			t.Fatalf("lookup a web.test = %q, %v; want its A and AAAA", got, err)
		}
	}
	close(s.senders)
	var from []netip.AddrPort
	for a := range s.senders {
		from = append(from, a)
	}
	if len(from) != 6 || slices.IndexFunc(from, func(a netip.AddrPort) bool { return a != from[0] }) >= 0 {
		t.Errorf("3 lookups sent %d questions from %v, want 6 from one address", len(from), from)
	}
}

// A question that goes unanswered is asked again on the same socket after the timeout; a name
// that does not exist is an error, as it is to the resolvers.
func TestConnectedClientAsksAgainAfterTheTimeout(t *testing.T) {
	s := startFakeServer(t, 1)
	c := s.client(t, 50*time.Millisecond)
	got, err := c.lookup("a", "web.test.")
	if err != nil || len(got) != 2 {
		t.Fatalf("lookup after a lost question = %q, %v; want the answer of the second try", got, err)
	}
	if _, err := c.lookup("a", "gone.test"); err == nil {
		t.Error("a name that does not exist: no error")
	}
}

func TestReadResolvConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(path, []byte("search ns.svc.cluster.local cluster.local\nnameserver 10.96.0.10\nnameserver 10.96.0.11\noptions ndots:5 timeout:2 attempts:3\n"), 0o644)
	conf, err := readResolvConf(path)
	if err != nil || conf.nameserver != "10.96.0.10" || conf.timeout != 2*time.Second || conf.attempts != 3 {
		t.Errorf("readResolvConf = %+v, %v; want the first nameserver, timeout 2 s, attempts 3", conf, err)
	}
	os.WriteFile(path, []byte("nameserver 10.96.0.10\n"), 0o644)
	if conf, _ := readResolvConf(path); conf.timeout != 5*time.Second || conf.attempts != 2 {
		t.Errorf("defaults = %+v, want timeout 5 s, attempts 2", conf)
	}
}

func TestReverseName(t *testing.T) {
	for addr, want := range map[string]string{
		"10.244.1.2": "2.1.244.10.in-addr.arpa.",
		"fd00::1":    "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
	} {
		if got := reverseName(netip.MustParseAddr(addr)); got != want {
			t.Errorf("reverseName(%s) = %s, want %s", addr, got, want)
		}
	}
}
