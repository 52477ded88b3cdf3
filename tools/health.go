package tools

import "time"

// ServerHealth is one tool server's state (an MCP server's), as its loader reports it and the
// admin pages and API show it: the JSON names are the admin API's.
type ServerHealth struct {
	Name string `json:"name"`
	// Transport is the configured transport, "http→sse" after a fallback to SSE.
	Transport string `json:"transport"`
	// ProtocolVersion is the MCP revision negotiated with the server ("2026-07-28",
	// "2025-11-25", ...) on its current or last connection; "" before the first.
	ProtocolVersion string      `json:"protocol_version,omitempty"`
	State           ServerState `json:"state"`
	// Tools counts the tools the server offers (while up) or last offered.
	Tools int `json:"tools"`
	// LastError is the latest connection failure ("" when none); URLs have their query and
	// credentials redacted.
	LastError string `json:"error,omitempty"`
	// Since is when the server entered State.
	Since time.Time `json:"since,omitzero"`
	// Resources are the resources the server listed when it last connected.
	Resources []ServerResource `json:"resources,omitempty"`
	// ResourceTemplates are the resource templates the server listed when it last connected.
	ResourceTemplates []ServerResourceTemplate `json:"resource_templates,omitempty"`
	// Prompts are the prompts the admin enabled as /prompt commands, as the server listed them.
	Prompts []ServerPrompt `json:"prompts,omitempty"`
}

// ServerPrompt is one prompt an MCP server offers (prompts/list).
type ServerPrompt struct {
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// ServerResource is one resource an MCP server offers (resources/list).
type ServerResource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
}

// ServerResourceTemplate is one resource template an MCP server offers
// (resources/templates/list): the URIs read_resource may read through it.
type ServerResourceTemplate struct {
	URITemplate string `json:"uri_template"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
	// Unmatched says why the bot reads no URI through the template (an expression it does
	// not match, a template too long); "" when it does.
	Unmatched string `json:"unmatched,omitempty"`
}

// ServerState is a tool server's connection state.
type ServerState string

// Connection states of a tool server.
const (
	ServerConnecting ServerState = "connecting"
	ServerUp         ServerState = "up"
	ServerDown       ServerState = "down"
)
