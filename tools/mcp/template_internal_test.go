package mcp

import (
	"strings"
	"testing"
)

// A template matches the URIs it expands to at levels 1 and 2, and nothing else; expressions the
// bot does not match, and malformed or oversized templates, are errors.
func TestTemplateMatchesItsExpansionsOnly(t *testing.T) {
	for _, c := range []struct {
		tmpl    string
		yes, no []string
		bad     bool
	}{
		{tmpl: "kit://notes/{topic}", yes: []string{"kit://notes/coffee", "kit://notes/a%20b", "kit://notes/x.y-z_~"},
			no: []string{"kit://notes/", "kit://notes/a/b", "kit://notes/a?b", "kit://notes/a b", "kit://note/a", "xkit://notes/a"}},
		{tmpl: "file:///{+path}", yes: []string{"file:///etc/hosts", "file:///a/b?c=d"}, no: []string{"file:///", "file:///a b"}},
		{tmpl: "doc://x{#frag}", yes: []string{"doc://x#top"}, no: []string{"doc://xtop", "doc://x"}},
		{tmpl: "demo://resource/dynamic/text/{resourceId}", yes: []string{"demo://resource/dynamic/text/7"}, no: []string{"demo://resource/dynamic/blob/7"}},
		{tmpl: "a.b://{x}.{y}", yes: []string{"a.b://1.2"}, no: []string{"aXb://1.2"}},
		{tmpl: "q://{?x,y}", bad: true},
		{tmpl: "q://{/x}", bad: true},
		{tmpl: "q://{x*}", bad: true},
		{tmpl: "q://{x:3}", bad: true},
		{tmpl: "q://{x", bad: true},
		{tmpl: "q://x}", bad: true},
		{tmpl: "q://{}", bad: true},
		{tmpl: "q:// {x}", bad: true},
		{tmpl: "", bad: true},
		{tmpl: "q://" + strings.Repeat("a", maxTemplateLen), bad: true},
		{tmpl: "q://" + strings.Repeat("{x}", maxTemplateExprs+1), bad: true},
	} {
		p, err := parseTemplate(c.tmpl)
		if c.bad {
			if err == nil {
				t.Errorf("template %.40q was taken", c.tmpl)
			}
			if p.matches("q://x") {
				t.Errorf("refused template %.40q matches", c.tmpl)
			}
			continue
		}
		if err != nil {
			t.Errorf("template %q: %v", c.tmpl, err)
			continue
		}
		for _, u := range c.yes {
			if !p.matches(u) {
				t.Errorf("%q does not match %q", c.tmpl, u)
			}
		}
		for _, u := range c.no {
			if p.matches(u) {
				t.Errorf("%q matches %q", c.tmpl, u)
			}
		}
	}
}

// A server's template and the model's URI are untrusted: whatever they are, compiling and
// matching stay within their caps and never panic.
func FuzzParseTemplate(f *testing.F) {
	f.Add("kit://notes/{topic}", "kit://notes/coffee")
	f.Add("file:///{+path}", "file:///a/b")
	f.Add("x{#y}{z}", "x#a")
	f.Add("{{}}", "")
	f.Fuzz(func(t *testing.T, tmpl, uri string) {
		p, err := parseTemplate(tmpl)
		if err != nil {
			return
		}
		if len(tmpl) > maxTemplateLen {
			t.Fatalf("a template of %d bytes was taken", len(tmpl))
		}
		if p.matches(uri) && len(uri) > maxResourceURI {
			t.Fatalf("a URI of %d bytes matched", len(uri))
		}
	})
}
