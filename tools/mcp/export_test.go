package mcp

import (
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
