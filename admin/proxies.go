package admin

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Proxies is what the admin listener knows about the network in front of it: which peers are
// reverse proxies whose X-Forwarded-For and X-Forwarded-Proto headers it believes, and whether
// browsers reach it over HTTPS (admin.public_url). The zero value trusts no proxy. The web chat
// takes Secure from it too, so both cookies follow the same rule.
type Proxies struct {
	trusted     []netip.Prefix
	publicHTTPS bool
}

// NewProxies reads the trusted proxies (IP addresses or CIDR prefixes, "10.0.0.0/8", "::1") and the
// public URL browsers use ("" when they reach the listener directly). Errors name the entry.
func NewProxies(trusted []string, publicURL string) (*Proxies, error) {
	p := &Proxies{}
	for i, t := range trusted {
		pfx, err := parsePrefix(t)
		if err != nil {
			return nil, fmt.Errorf("admin: trusted proxy %d (%q): want an IP address or CIDR prefix: %w", i, t, err)
		}
		p.trusted = append(p.trusted, pfx)
	}
	if publicURL != "" {
		u, err := url.Parse(publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("admin: public URL %q: want an http(s) URL", publicURL)
		}
		p.publicHTTPS = u.Scheme == "https"
	}
	return p, nil
}

// parsePrefix reads "10.0.0.0/8" or a single address ("10.0.0.5", "::1").
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("parse prefix: %w", err)
		}
		return pfx.Masked(), nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("parse address: %w", err)
	}
	ip = ip.Unmap()
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}

func (p *Proxies) isTrusted(ip netip.Addr) bool {
	if p == nil || !ip.IsValid() {
		return false
	}
	for _, pfx := range p.trusted {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// peer is the TCP peer's address; invalid when RemoteAddr cannot be read.
func peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ClientIP returns the address of the client behind r: the TCP peer, or, when the peer is a
// trusted proxy, the nearest address in X-Forwarded-For that is not a trusted proxy (read from
// the right, since each proxy appends the address it saw; entries further left are the client's
// own claims). An unreadable entry stops the walk at the last address known to be real.
func (p *Proxies) ClientIP(r *http.Request) netip.Addr {
	ip := peer(r)
	if !p.isTrusted(ip) {
		return ip
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return ip
		}
		ip = hop.Unmap()
		if !p.isTrusted(ip) {
			return ip
		}
	}
	return ip
}

// Secure reports whether the browser reached the bot over HTTPS, so that cookies set on r must
// be Secure: the listener terminates TLS, the public URL is https, or a trusted proxy says so in
// X-Forwarded-Proto (the header of anyone else is ignored).
func (p *Proxies) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if p == nil {
		return false
	}
	if p.publicHTTPS {
		return true
	}
	if !p.isTrusted(peer(r)) {
		return false
	}
	for _, h := range r.Header.Values("X-Forwarded-Proto") {
		for _, v := range strings.Split(h, ",") {
			if strings.EqualFold(strings.TrimSpace(v), "https") {
				return true
			}
		}
	}
	return false
}
