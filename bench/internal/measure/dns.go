package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"
)

// HasA says whether r is a successful reply with an A record of ip.
func HasA(r *dns.Msg, ip string) bool {
	if r.Rcode != dns.RcodeSuccess {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == ip {
			return true
		}
	}
	return false
}

// Ask sends one query over UDP with a 4096-byte EDNS buffer, and over TCP when the reply is truncated;
// it tries 3 times.
func Ask(ctx context.Context, addr, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(4096, false)
	var err error
	for range 3 {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		var r *dns.Msg
		r, _, err = (&dns.Client{Net: "udp", Timeout: 2 * time.Second}).ExchangeContext(ctx, m, addr)
		if err == nil && r.Truncated {
			r, _, err = (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).ExchangeContext(ctx, m, addr)
		}
		if err == nil {
			return r, nil
		}
	}
	return nil, err
}

// WaitA polls name until it answers ip, for up to 10 minutes.
func WaitA(ctx context.Context, addr, name, ip string) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		if r, err := Ask(ctx, addr, name, dns.TypeA); err == nil && HasA(r, ip) {
			return nil
		}
		if err := Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s did not answer %s within 10 minutes", name, ip)
}
