// Package outbound is the one guarded way the bot speaks HTTP to servers it does not control:
// fetch_url's pages, remote MCP servers and their OAuth authorization servers. Every connection
// is checked at dial time against the address it resolved to, so a name that points inside
// cannot get around the rule: loopback, private, link-local and other non-public addresses are
// refused unless the admin configured the server as local. Clients that carry credentials
// follow redirects within the origin they started on only (SameOrigin), so a token or header
// never travels to a host the admin did not name.
package outbound

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// MaxRedirects caps the redirects a guarded client follows.
const MaxRedirects = 5

// Options shape a guarded dialer, transport or client.
type Options struct {
	// Local says the admin configured the server as local (an MCP server's local = true,
	// fetch_url's allow_private): non-public addresses may be reached.
	Local bool
	// Permit, when set, is asked about each non-public address the rule would refuse, at dial
	// time; true lets that one connection through (fetch_url's allow list).
	Permit func(addr netip.AddrPort) bool
	// ResponseHeaderTimeout bounds the wait for a response's headers; 0: none.
	ResponseHeaderTimeout time.Duration
	// DisableKeepAlives closes each connection after its request.
	DisableKeepAlives bool
}

// RefusedError is the dialer's refusal of an address the rule does not let through.
type RefusedError struct {
	Addr netip.AddrPort
	// Reason names the kind of address ("loopback", "private", "link-local", ...).
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refusing to connect to %s: %s address", e.Addr.Addr(), e.Reason)
}

// ErrCrossOrigin is wrapped by the error of a redirect SameOrigin refuses.
var ErrCrossOrigin = errors.New("redirect to another origin refused")

// NonPublic names the kind of a non-public address, or "" for a public one.
func NonPublic(a netip.Addr) string {
	a = a.Unmap()
	if nat64.Contains(a) { // 64:ff9b::a.b.c.d reaches a.b.c.d
		b := a.As16()
		return NonPublic(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range otherNonPublic {
		if p.Contains(a) {
			return "non-public"
		}
	}
	return ""
}

var (
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	otherNonPublic = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
		netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT, also cloud metadata services
		netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
		netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
		netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	}
)

// Dialer returns a dialer that checks each connection's resolved address against the rule.
func Dialer(o Options) *net.Dialer {
	return &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("refusing to connect to %q: not an IP address and port", address)
			}
			if o.Local {
				return nil
			}
			if reason := NonPublic(ap.Addr()); reason != "" && (o.Permit == nil || !o.Permit(ap)) {
				return &RefusedError{Addr: ap, Reason: reason}
			}
			return nil
		},
	}
}

// Transport returns an HTTP transport that dials through Dialer(o) and never through a proxy
// (a proxy would connect on the bot's behalf, past the address check).
func Transport(o Options) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           Dialer(o).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		DisableKeepAlives:     o.DisableKeepAlives,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
	}
}

// Client returns a client on Transport(o) that follows redirects within the first request's
// origin only (SameOrigin); timeout bounds each request whole (0: none).
func Client(o Options, timeout time.Duration) *http.Client {
	return &http.Client{Transport: Transport(o), CheckRedirect: SameOrigin, Timeout: timeout}
}

// SameOrigin is an http.Client CheckRedirect for clients that carry credentials: it follows
// at most MaxRedirects redirects, each to the origin (scheme, host and port) of the first
// request; any other is refused with an error wrapping ErrCrossOrigin that names the origins,
// never the URLs (a Location may carry a secret).
func SameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("more than %d redirects", MaxRedirects)
	}
	from, to := Origin(via[0].URL), Origin(req.URL)
	if from != to {
		return fmt.Errorf("%w: %s redirected to %s", ErrCrossOrigin, from, to)
	}
	return nil
}

// Origin returns u's origin as "scheme://host:port", lower case, with the scheme's default
// port made explicit.
func Origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// SameOriginURL reports whether raw is an absolute URL on origin (as Origin renders it).
func SameOriginURL(raw, origin string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Host != "" && Origin(u) == origin
}

// PinOrigin returns a RoundTripper that sends through next only the requests to origin (as
// Origin renders it) and refuses every other with an error wrapping ErrCrossOrigin: what a
// client adds to its requests (configured headers, an OAuth token) stays with the server
// the admin named, whatever URL the server hands back (an SSE endpoint, a redirect).
func PinOrigin(origin string, next http.RoundTripper) http.RoundTripper {
	return pinned{origin: origin, next: next}
}

type pinned struct {
	origin string
	next   http.RoundTripper
}

func (p pinned) RoundTrip(req *http.Request) (*http.Response, error) {
	if o := Origin(req.URL); o != p.origin {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: a request for %s went to %s", ErrCrossOrigin, p.origin, o)
	}
	return p.next.RoundTrip(req)
}
