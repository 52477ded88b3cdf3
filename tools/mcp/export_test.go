package mcp

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/server"
)

// InProcess configures a server reached in process, for tests and benchmarks.
func InProcess(name string, srv *server.MCPServer, callTimeout time.Duration) ServerConfig {
	return ServerConfig{
		Name: name, Transport: "inprocess", ToolCallTimeout: callTimeout,
		dial: func() transport.Interface { return transport.NewInProcessTransport(srv) },
	}
}

// OverHTTP configures a streamable HTTP server at url reached with c (a test's network in
// memory, for a synctest bubble), as dialRemote reaches one.
func OverHTTP(name, url string, c *http.Client) ServerConfig {
	return ServerConfig{
		Name: name, Transport: TransportHTTP, URL: url,
		dial: func() transport.Interface {
			t, err := transport.NewStreamableHTTP(url, transport.WithHTTPBasicClient(c), transport.WithContinuousListening(),
				transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				panic(err) // a test's fixed URL
			}
			return t
		},
	}
}

// WithTaskSweep looks for the tasks stopped processes left every d instead of every 5 minutes.
func WithTaskSweep(d time.Duration) Option {
	return func(o *options) { o.taskSweep = d }
}
