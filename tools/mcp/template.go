package mcp

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"relaybot/tools"
)

// Resource templates (MCP resources/templates/list): a server names families of resources by
// RFC 6570 URI templates ("notes://{name}"). They are listed with the server's resources, and
// read_resource reads a URI that one of them expands to. A template is the server's to write, so
// it is read under limits and only the expressions whose matches can be told apart are taken:
// {var} (level 1: unreserved characters and %-escapes), {+var} and {#var} (level 2: reserved
// characters too). A template with any other expression is listed but matches nothing.

// Caps on a server's templates and on the URIs read through them.
const (
	// maxTemplates is how many of a server's templates are kept from its listing.
	maxTemplates = 100
	// maxTemplateLen caps a template's length; a longer one matches nothing.
	maxTemplateLen = 1024
	// maxTemplateExprs caps the expressions of one template.
	maxTemplateExprs = 16
	// maxResourceURI caps a URI read_resource sends to a server.
	maxResourceURI = 2048
	// describedTemplates is how many templates the read_resource tool's description names.
	describedTemplates = 20
)

// Character classes of an expansion (RFC 6570 §1.5): unreserved characters and %-escapes for a
// simple expansion; reserved characters too for + and #.
const (
	simpleChars   = `(?:[A-Za-z0-9\-._~]|%[0-9A-Fa-f]{2})+`
	reservedChars = `(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})+`
)

// varNamePattern is an RFC 6570 variable name (varchar: ALPHA / DIGIT / "_" / pct-encoded, dots
// between).
var varNamePattern = regexp.MustCompile(`^(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+(?:\.(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+)*$`)

// uriTemplate is one template of a server, compiled to the URIs it expands to.
type uriTemplate struct {
	re *regexp.Regexp // nil: the template matches nothing
}

// parseTemplate compiles a server's template; one that is too long or uses an expression the
// bot does not match is an error.
func parseTemplate(raw string) (uriTemplate, error) {
	if raw == "" || len(raw) > maxTemplateLen {
		return uriTemplate{}, fmt.Errorf("the template is empty or longer than %d bytes", maxTemplateLen)
	}
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
		return uriTemplate{}, errors.New("the template has spaces or control characters")
	}
	var b strings.Builder
	b.WriteString("^")
	exprs := 0
	for rest := raw; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return uriTemplate{}, errors.New("the template has an unmatched '}'")
			}
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		if strings.IndexByte(rest[:open], '}') >= 0 {
			return uriTemplate{}, errors.New("the template has an unmatched '}'")
		}
		b.WriteString(regexp.QuoteMeta(rest[:open]))
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return uriTemplate{}, errors.New("the template has an unclosed '{'")
		}
		if exprs++; exprs > maxTemplateExprs {
			return uriTemplate{}, fmt.Errorf("the template has more than %d expressions", maxTemplateExprs)
		}
		expr := rest[open+1 : open+end]
		class := simpleChars
		switch {
		case strings.HasPrefix(expr, "+"):
			expr, class = expr[1:], reservedChars
		case strings.HasPrefix(expr, "#"):
			expr, class = expr[1:], "#"+reservedChars
		}
		if !varNamePattern.MatchString(expr) {
			return uriTemplate{}, fmt.Errorf("the template's expression {%s} is not one the bot matches ({var}, {+var}, {#var})",
				tools.Truncate(rest[open+1:open+end], 40))
		}
		b.WriteString(class)
		rest = rest[open+end+1:]
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return uriTemplate{}, fmt.Errorf("the template cannot be matched: %w", err)
	}
	return uriTemplate{re: re}, nil
}

// matches reports whether uri is one the template expands to.
func (t uriTemplate) matches(uri string) bool {
	return t.re != nil && len(uri) <= maxResourceURI && t.re.MatchString(uri)
}

// listTemplates reads the server's resource templates (up to maxTemplates) when it offers
// resources; nil otherwise. A template the bot cannot match is kept for the Servers page, with
// why.
func (s *serverConn) listTemplates(ctx context.Context, sess *session) ([]tools.ServerResourceTemplate, []uriTemplate, error) {
	if sess.caps.Resources == nil {
		return nil, nil, nil
	}
	res, err := sess.client.ListResourceTemplates(ctx, mcpgo.ListResourceTemplatesRequest{})
	if err != nil {
		return nil, nil, err
	}
	var listed []tools.ServerResourceTemplate
	var parsed []uriTemplate
	for _, rt := range res.ResourceTemplates {
		if len(listed) == maxTemplates {
			break
		}
		if rt.URITemplate == nil || rt.URITemplate.Template == nil {
			continue
		}
		raw := rt.URITemplate.Raw()
		t := tools.ServerResourceTemplate{URITemplate: tools.Truncate(raw, maxTemplateLen), Name: rt.Name,
			Description: rt.Description, MIMEType: rt.MIMEType}
		p, err := parseTemplate(raw)
		if err != nil {
			t.Unmatched = err.Error()
		}
		listed, parsed = append(listed, t), append(parsed, p)
	}
	return listed, parsed, nil
}

// readable checks a URI the model asks read_resource for: a resource the server listed, or one a
// template of the server expands to. When the server listed more resources than are kept, a URI
// not among them is left to the server to refuse.
func (ss *session) readable(server, uri string) error {
	if len(uri) > maxResourceURI {
		return fmt.Errorf("the URI is longer than %d bytes", maxResourceURI)
	}
	ss.taskMu.Lock()
	defer ss.taskMu.Unlock()
	for _, r := range ss.resources {
		if r.URI == uri {
			return nil
		}
	}
	for _, t := range ss.templates {
		if t.matches(uri) {
			return nil
		}
	}
	if ss.moreResources {
		return nil
	}
	return fmt.Errorf("'%s' is neither a resource server '%s' listed nor one its resource templates expand to",
		tools.Truncate(uri, 200), server)
}
