package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"relaybot/audit"
	dtk "relaybot/internal/testkit/discord"
	imagekit "relaybot/internal/testkit/images"
	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/internal/testkit/websearch"
)

// hostileResults are a search's results as a hostile page would title them: a Markdown link to
// a tg:// URL in a title, a javascript: URL, HTML in a snippet.
func hostileResults(q string) []websearch.Result {
	return []websearch.Result{
		{Title: "Go 1.26 released [open](tg://resolve?domain=evil)", URL: "https://go.dev/blog/go1.26", Snippet: "<b>Go 1.26</b> is out."},
		{Title: "Evil", URL: "javascript:alert(1)", Snippet: "click"},
		{Title: "Release notes", URL: "https://go.dev/doc/go1.26", Snippet: "What changed in " + q + "."},
	}
}

// citingModel calls web_search for a user message, then answers citing the first result by the
// URL the tool gave it, and adds links the renderers must make inert.
func citingModel(r llm.Request) llm.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role != "tool" {
		return llm.ToolCalls(llm.Call{ID: "call_search", Name: "web_search", Args: []string{`{"query":"` + last.Content + `"}`}})
	}
	m := regexp.MustCompile(`\[1\] .*\nURL: (\S+)`).FindStringSubmatch(last.Content)
	if m == nil {
		return llm.Text("tool said: " + last.Content)
	}
	return llm.Text("Go 1.26 is out [1](" + m[1] + "). Also [free](tg://resolve?domain=evil) and [js](javascript:alert(1)).")
}

// searchTools adds [tools.web_search] against fake to c and offers web_search.
func searchTools(c *tomlConfig, fake *websearch.Server, provider, key string) *tomlConfig {
	c.set("tools", "native", []string{"current_time", "web_search"})
	pairs := []any{"provider", provider, "base_url", fake.URL, "results", 3}
	if key != "" {
		pairs = append(pairs, "api_key", key)
	}
	return c.set("tools.web_search", pairs...)
}

// TestASearchIsCitedAndItsLinksRenderSafelyOnTelegramAndTheWebChat: the model gets numbered,
// clean results, and its answer's citation becomes a link on Telegram and in the web chat while
// a tg:// or javascript: link it writes stays text.
func TestASearchIsCitedAndItsLinksRenderSafelyOnTelegramAndTheWebChat(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	fake := websearch.New(websearch.SearXNG, websearch.Options{})
	t.Cleanup(fake.Close)
	fake.SetResults(hostileResults)
	e, w := startWebBotWith(t, citingModel, 60, func(c *tomlConfig) { searchTools(c, fake, "searxng", "") })

	e.say(4200, "go release")
	final := e.waitBotText(4200, "the cited answer", contains("Go 1.26 is out"))
	var toolMsg string
	for _, m := range e.llm.Requests()[len(e.llm.Requests())-1].Messages {
		if m.Role == "tool" {
			toolMsg = m.Content
		}
	}
	for _, want := range []string{"[1] Go 1.26 released (open)(tg://resolve?domain=evil)\nURL: https://go.dev/blog/go1.26\nGo 1.26 is out.",
		"[2] Release notes\nURL: https://go.dev/doc/go1.26"} {
		if !strings.Contains(toolMsg, want) {
			t.Errorf("the model read\n%s\nwithout %q", toolMsg, want)
		}
	}
	if strings.Contains(toolMsg, "javascript:") {
		t.Errorf("the model read the javascript: result:\n%s", toolMsg)
	}
	var links []string
	for _, m := range e.tg.BotMessages(4200) {
		if m.Text != final {
			continue
		}
		for _, en := range m.Entities {
			if en.Type == "text_link" || en.Type == "url" {
				links = append(links, en.URL)
			}
		}
	}
	if len(links) != 1 || links[0] != "https://go.dev/blog/go1.26" {
		t.Errorf("Telegram's links in %q: %q, want only the citation's", final, links)
	}

	w.say("go release")
	m := w.waitMsg("the web chat's cited answer", func(m webMsg) bool { return m.Role == "bot" && strings.Contains(m.HTML, "Go 1.26 is out") })
	hrefs := regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(m.HTML, -1)
	if len(hrefs) != 1 || hrefs[0][1] != "https://go.dev/blog/go1.26" {
		t.Errorf("the web chat's links in %s: %q, want only the citation's", m.HTML, hrefs)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("the provider was asked %d times for the same query, want 1 (the second from the cache)", n)
	}
}

// TestACitationRendersAsALinkOnDiscordAndAnUnsafeOneStaysText.
func TestACitationRendersAsALinkOnDiscordAndAnUnsafeOneStaysText(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	fake := websearch.New(websearch.Brave, websearch.Options{Key: "brave-key-1"})
	t.Cleanup(fake.Close)
	fake.SetResults(hostileResults)
	e := newEnv(t)
	e.llm.SetHandler(citingModel)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	e.discord = []any{"enabled", true, "token", dc.Token(), "api_base", dc.APIBase()}
	cfg := searchTools(e.toml(), fake, "brave", "brave-key-1").parse(t)
	e.start(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20e9)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	const guild, channel = "900000000000000001", "800000000000000001"
	if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, GuildID: guild, AuthorID: "600", MentionBot: true,
		Content: "<@100000000000000001> go release"}); err != nil {
		t.Fatal(err)
	}
	var got string
	wait.For(t, "the cited answer on Discord", func() bool {
		for _, m := range dc.BotMessages(channel) {
			if strings.Contains(m.Content, "Go 1.26 is out") {
				got = m.Content
				return true
			}
		}
		return false
	})
	if !strings.Contains(got, "[1](https://go.dev/blog/go1.26)") {
		t.Errorf("Discord got %q, want the citation as a masked link", got)
	}
	if strings.Contains(got, "](tg://") || strings.Contains(got, "](javascript:") {
		t.Errorf("Discord got %q: an unsafe link is still a link", got)
	}
}

// TestASearchProvidersRefusalReachesTheModelAndTheAudit: each provider's refusal is one clear
// sentence for the model and an error row in the audit, without the key anywhere.
func TestASearchProvidersRefusalReachesTheModelAndTheAudit(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	const key = "live-search-key-42"
	for _, c := range []struct {
		name, provider, key string
		fake                websearch.Options
		setup               func(*websearch.Server)
		want                string
	}{
		{"brave wrong key", websearch.Brave, key, websearch.Options{Key: "other"}, nil, "brave answered HTTP 401 (the bot's API key was refused: an admin must check tools.web_search.api_key)"},
		{"tavily rate limit", websearch.Tavily, key, websearch.Options{Key: key}, func(s *websearch.Server) { s.RateLimit(1) }, "tavily answered HTTP 429 (rate limited"},
		{"searxng without json", websearch.SearXNG, "", websearch.Options{NoJSON: true}, nil, "searxng answered HTTP 403 (the instance refuses format=json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := websearch.New(c.provider, c.fake)
			t.Cleanup(fake.Close)
			if c.setup != nil {
				c.setup(fake)
			}
			e := newEnv(t)
			e.llm.SetHandler(citingModel)
			stop := e.start(searchTools(e.toml(), fake, c.provider, c.key).parse(t))
			e.say(4300, "anything")
			said := e.waitBotText(4300, "the model's answer after the refusal", contains("tool said: "))
			if !strings.Contains(said, c.want) {
				t.Errorf("the model was told %q, want %q", said, c.want)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			rows, _, err := e.openStore().ToolCalls.ToolCalls(context.Background(), audit.Filter{Tool: "web_search"})
			if err != nil || len(rows) != 1 {
				t.Fatalf("audit rows %+v, %v; want one", rows, err)
			}
			if r := rows[0]; r.Status != audit.StatusError || !strings.Contains(r.Error, c.want) || r.Source != audit.SourceNative {
				t.Errorf("audit row: status %s, source %s, error %q; want error with %q", r.Status, r.Source, r.Error, c.want)
			}
			if strings.Contains(e.logs.String(), key) || strings.Contains(rows[0].Error, key) {
				t.Errorf("the key reached the log or the audit")
			}
		})
	}
}

// imageModel calls generate_image for a user message (not a command) and then answers.
func imageModel(r llm.Request) llm.Reply {
	last := r.Messages[len(r.Messages)-1]
	if last.Role == "tool" {
		return llm.Text("Here it is. (" + last.Content + ")")
	}
	return llm.ToolCalls(llm.Call{ID: "call_img", Name: "generate_image", Args: []string{`{"prompt":"a red fox in snow"}`}})
}

// imageTools adds [tools.images] against fake, priced 0.04 an image.
func imageTools(c *tomlConfig, fake *imagekit.Server) *tomlConfig {
	return c.set("tools", "native", []string{"current_time", "generate_image"}).
		set("tools.images", "base_url", fake.URL, "api_key", "img-key-7", "model", "gpt-image-1", "size", "1024x1024", "price_per_image", 0.04)
}

// TestAGeneratedImageGoesWithTheFinalAnswerAndIsBilled: on Telegram, in the web chat and on
// Discord the image arrives with the answer, /usage counts it at its price, and so does the
// model cost in the metrics.
func TestAGeneratedImageGoesWithTheFinalAnswerAndIsBilled(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	fake := imagekit.New("img-key-7")
	t.Cleanup(fake.Close)
	dc := dtk.New(dtk.Config{})
	t.Cleanup(dc.Close)
	e, w := startWebBotWith(t, imageModel, 60, func(c *tomlConfig) {
		imageTools(c, fake).set("discord", "enabled", true, "token", dc.Token(), "api_base", dc.APIBase())
	})

	e.say(4400, "draw a fox")
	e.waitBotText(4400, "the answer", contains("Here it is."))
	wait.For(t, "the image on Telegram", func() bool {
		for _, m := range e.tg.BotMessages(4400) {
			if m.Kind == "photo" && bytes.Equal(m.Data, imagekit.PNG()) {
				return true
			}
		}
		return false
	})

	w.say("draw a fox")
	defer func() {
		if t.Failed() {
			w.mu.Lock()
			for _, id := range w.ids {
				t.Logf("web message %+v", w.msgs[id])
			}
			w.mu.Unlock()
		}
	}()
	w.waitMsg("the web chat's answer", func(m webMsg) bool { return m.Role == "bot" && strings.Contains(m.Text, "Here it is.") })
	img := w.waitMsg("the image in the web chat", func(m webMsg) bool {
		return m.Role == "bot" && len(m.Files) == 1 && m.Files[0].Name == "image.png"
	})
	resp, err := w.client.Get(w.base + img.Files[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, imagekit.PNG()) {
		t.Errorf("the web chat's image is %d bytes (%s), want the generated PNG", len(got), resp.Status)
	}

	e.say(4400, "/usage")
	usage := e.waitBotText(4400, "the usage", contains("Your usage"))
	if !strings.Contains(usage, "1 images") || !strings.Contains(usage, "cost 0.0400") {
		t.Errorf("/usage said %q, want one image at 0.04", usage)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dc.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	const channel = "500000000000000107" // a direct message: in a guild the image would be asked for first
	if _, err := dc.Post(dtk.UserMessage{ChannelID: channel, AuthorID: "600", Content: "draw a fox"}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the answer on Discord with the image attached to it", func() bool {
		for _, m := range dc.BotMessages(channel) {
			if strings.Contains(m.Content, "Here it is.") && len(m.Attachments) == 1 &&
				m.Attachments[0].Filename == "image.png" && bytes.Equal(m.Attachments[0].Data, imagekit.PNG()) {
				return true
			}
		}
		return false
	})
	if reqs := fake.Requests(); len(reqs) != 3 || reqs[0].Model != "gpt-image-1" || reqs[0].Size != "1024x1024" {
		t.Errorf("the images endpoint got %+v", reqs)
	}
	cost := regexp.MustCompile(`relaybot_model_cost_total\{model="gpt-image-1"\} (\S+)`)
	wait.For(t, "three images at 0.04 in the metrics' model cost", func() bool {
		resp, err := w.client.Get(w.base + "/metrics")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := cost.FindSubmatch(body)
		if m == nil {
			return false
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		return err == nil && math.Abs(v-0.12) < 1e-9
	})
}

// TestGenerateImageInAGroupAsksForApprovalFirst: no policy rule names generate_image, so in a
// group it asks; the chat admin's approval runs it and the image reaches the group.
func TestGenerateImageInAGroupAsksForApprovalFirst(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	fake := imagekit.New("img-key-7")
	t.Cleanup(fake.Close)
	e := newEnv(t)
	e.llm.SetHandler(imageModel)
	e.start(imageTools(e.toml(), fake).parse(t))
	group := tgkit.Chat{ID: -600, Type: "group", Title: "artists"}
	e.tg.SetChatAdmin(group.ID, 9)
	e.tg.Send(tgkit.Inbound{Chat: group, From: user(7), Text: "@relay_test_bot draw a fox"})
	var q tgkit.Message
	wait.For(t, "the approval question", func() bool {
		for _, m := range e.tg.BotMessages(group.ID) {
			if strings.Contains(m.Text, "generate_image") && strings.Contains(m.ReplyMarkup, ":approve") {
				q = m
				return true
			}
		}
		return false
	})
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the image was generated before anyone approved (%d requests)", n)
	}
	e.tg.Press(group, user(9), q.ID, pressData(t, q, "approve"))
	e.waitBotText(group.ID, "the answer after approval", contains("Here it is."))
	wait.For(t, "the image in the group", func() bool {
		for _, m := range e.tg.BotMessages(group.ID) {
			if m.Kind == "photo" {
				return true
			}
		}
		return false
	})
}

// TestImagesUseUpTheCostQuota: an image is a cost like tokens. With a daily cost quota of one
// image's price, the first image is made, billed and delivered, the model's next round is refused
// with the quota's line, and the person's next message is refused before the model or the
// images endpoint is asked.
func TestImagesUseUpTheCostQuota(t *testing.T) {
	t.Parallel() // mostly waiting, on little CPU (main_test.go)
	fake := imagekit.New("img-key-7")
	t.Cleanup(fake.Close)
	e := newEnv(t)
	e.llm.SetHandler(imageModel)
	e.start(imageTools(e.toml(), fake).set("quotas.user", "cost_per_day", 0.04).parse(t))
	e.say(4500, "draw a fox")
	e.waitBotText(4500, "the quota's line after the image", contains("You have used up today's quota (cost 0.0400 of 0.0400)"))
	wait.For(t, "the paid image delivered all the same", func() bool {
		for _, m := range e.tg.BotMessages(4500) {
			if m.Kind == "photo" && bytes.Equal(m.Data, imagekit.PNG()) {
				return true
			}
		}
		return false
	})
	calls := e.llm.RequestCount()
	e.say(4500, "draw another")
	wait.For(t, "the second refusal", func() bool {
		n := 0
		for _, s := range e.botTexts(4500) {
			if strings.Contains(s, "You have used up today's quota") {
				n++
			}
		}
		return n == 2
	})
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("the images endpoint was asked %d times, want 1", n)
	}
	if n := e.llm.RequestCount(); n != calls {
		t.Errorf("the model was asked %d more times after the quota was used up", n-calls)
	}
}
