package kubetree

import (
	"net"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
)

// localIPs are the addresses this server answers on, for ns.dns.<zone>: the bound addresses, or
// with no bind the interfaces' addresses that can be glue (interfaceIPs).
func localIPs(c *caddy.Controller) []net.IP {
	var ips []net.IP
	hosts := dnsserver.GetConfig(c).ListenHosts
	if len(hosts) == 0 || hosts[0] == "" {
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil
		}
		return interfaceIPs(addrs)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() {
			ips = append(ips, ip)
		}
	}
	return ips
}

// interfaceIPs are the interface addresses a client elsewhere can reach this server at: not
// loopback, and not link-local (fe80::/10, 169.254.0.0/16), which means nothing off the link and
// must never be glue.
func interfaceIPs(addrs []net.Addr) []net.IP {
	var ips []net.IP
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a.String()); err == nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsMulticast() {
			ips = append(ips, ip)
		}
	}
	return ips
}

// serverLabel is the server label of the block's metrics, as CoreDNS's own plugins write it
// (transport://host:port, the server's address).
func serverLabel(c *caddy.Controller) string {
	cfg := dnsserver.GetConfig(c)
	host := ""
	if len(cfg.ListenHosts) > 0 {
		host = cfg.ListenHosts[0]
	}
	addr := net.JoinHostPort(host, cfg.Port)
	if a, err := net.ResolveTCPAddr("tcp", addr); err == nil {
		addr = a.String()
	}
	return cfg.Transport + "://" + addr
}
