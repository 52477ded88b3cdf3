package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"relaybot/adapters"
	"relaybot/chat"
	tk "relaybot/internal/testkit/telegram"
)

// wireToken is the token of the recording server; the tests look for it in errors.
const wireToken = "4242:WIRE-secret"

// recordedConn is a server's connection that keeps the bytes the client sent since the last
// take.
type recordedConn struct {
	net.Conn
	mu  sync.Mutex
	got bytes.Buffer
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.got.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

// take returns the bytes read since the last take.
func (c *recordedConn) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := bytes.Clone(c.got.Bytes())
	c.got.Reset()
	return b
}

type recordingListener struct{ net.Listener }

func (l recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c}, nil
}

type connKey struct{}

// wireRequest is one request as the server read it off the connection.
type wireRequest struct {
	method string
	raw    []byte
	form   url.Values
}

// closeConnection, as a wireServer's answer, closes the connection instead of answering.
const closeConnection = "close"

// wireServer is a Bot API server on loopback that keeps every request's bytes as they came
// over the connection and answers each method with a fixed body (getMe and success by
// default).
type wireServer struct {
	url     string
	mu      sync.Mutex
	reqs    []wireRequest
	answers map[string]string // method → body; missing: {"ok":true,"result":{"message_id":5}}
}

func newWireServer(t *testing.T, answers map[string]string) *wireServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ws := &wireServer{url: "http://" + ln.Addr().String() + "/bot%s/%s", answers: answers}
	srv := &http.Server{
		Handler: http.HandlerFunc(ws.serve),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go srv.Serve(recordingListener{ln})
	t.Cleanup(func() { srv.Close() })
	return ws
}

func (ws *wireServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	raw := r.Context().Value(connKey{}).(*recordedConn).take()
	ws.mu.Lock()
	ws.reqs = append(ws.reqs, wireRequest{method: method, raw: raw, form: form})
	ws.mu.Unlock()
	reply, ok := ws.answers[method]
	switch {
	case ok:
	case method == "getMe":
		reply = `{"ok":true,"result":{"id":4242,"is_bot":true,"first_name":"Wire","username":"wire_bot"}}`
	case method == "getUpdates":
		reply = `{"ok":true,"result":[]}`
	default:
		reply = `{"ok":true,"result":{"message_id":5,"chat":{"id":42,"type":"private"},"date":1,"text":"ok"}}`
	}
	if reply == closeConnection {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
		return
	}
	if code, rest, ok := strings.Cut(reply, " "); ok && len(code) == 3 && code[0] >= '1' && code[0] <= '5' {
		w.WriteHeader(int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0'))
		reply = rest
	}
	io.WriteString(w, reply)
}

// taken returns the requests received since the last call.
func (ws *wireServer) taken() []wireRequest {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	r := ws.reqs
	ws.reqs = nil
	return r
}

func newWireAdapter(t *testing.T, ws *wireServer, mod func(*Options)) *Adapter {
	t.Helper()
	opts := Options{Token: wireToken, APIEndpoint: ws.url, PaidBroadcast: true, GlobalPerSecond: 1000, RetryAfterUnit: time.Millisecond}
	if mod != nil {
		mod(&opts)
	}
	ad, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ad.Engine().Close)
	ws.taken() // getMe
	return ad
}

// Every call a turn makes reaches Telegram exactly as tgbotapi's MakeRequest sends it: the
// same request line, headers and body, byte for byte, for the messenger's own calls and for
// parameters with every byte value, empty values and none at all.
func TestCallsPutOnTheWireWhatMakeRequestSends(t *testing.T) {
	ws := newWireServer(t, nil)
	ad := newWireAdapter(t, ws, nil)
	m := &messenger{api: ad.api, drafts: true, paid: true}
	ctx := context.Background()
	dm := chat.Ref{Platform: chat.Telegram, ChatID: "42"}
	topic := chat.Ref{Platform: chat.Telegram, ChatID: "-100300", ThreadID: "7"}
	text := strings.Join(answer(60), "") + " [a link](https://example.com/?q=a+b&c=%20) 100% ~tilde~ = + & #"
	var every strings.Builder
	for c := range 256 {
		every.WriteByte(byte(c))
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"sendMessage, a reply with a Stop button, paid", func() error {
			_, err := m.Send(ctx, dm, text, adapters.SendOptions{ReplyTo: "3", Stoppable: true})
			return err
		}},
		{"sendMessage in a topic", func() error { _, err := m.Send(ctx, topic, "plain", adapters.SendOptions{}); return err }},
		{"sendMessageDraft, stoppable", func() error { return m.Draft(ctx, dm, 99, text, true) }},
		{"editMessageText, streaming", func() error {
			return m.EditStreaming(ctx, adapters.MessageRef{Chat: topic, ID: "5"}, text)
		}},
		{"editMessageText, final", func() error { return m.Edit(ctx, adapters.MessageRef{Chat: dm, ID: "5"}, text) }},
		{"sendChatAction", func() error { return m.Typing(ctx, topic) }},
		{"getUpdates", func() error { _, err := ad.getUpdates(ctx, 1234); return err }},
		{"deleteWebhook, no parameters", func() error {
			return ad.api.callInto(ctx, "deleteWebhook", tgbotapi.Params{}, nil)
		}},
		{"every byte, an empty value", func() error {
			_, err := ad.api.call(ctx, "setMyCommands", tgbotapi.Params{"commands": every.String(), "k e/y&=": "", "scope": `{"type":"default"}`})
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := ws.taken()
		if len(got) != 1 {
			t.Fatalf("%s: %d requests, want 1", c.name, len(got))
		}
		params := tgbotapi.Params{}
		for k, v := range got[0].form {
			params[k] = v[0]
		}
		if _, err := ad.api.with(ctx).MakeRequest(got[0].method, params); err != nil {
			t.Fatalf("%s: MakeRequest: %v", c.name, err)
		}
		want := ws.taken()
		if len(want) != 1 || !bytes.Equal(got[0].raw, want[0].raw) {
			t.Errorf("%s: Telegram would receive\n%q\nwhere tgbotapi sends\n%q", c.name, got[0].raw, want[0].raw)
		}
		// The Stop button is written once, as json.Marshal wrote it for every call before.
		old, _ := json.Marshal(map[string]any{"inline_keyboard": [][]map[string]string{{{"text": "Stop", "callback_data": StopData}}}})
		if k, ok := got[0].form["reply_markup"]; ok && k[0] != string(old) {
			t.Errorf("%s: the Stop button goes out as %s, not as before (%s)", c.name, k[0], old)
		}
	}
}

// What Telegram answers is read as tgbotapi reads it: its failures keep their kinds (a 429
// waits its retry_after, a 5xx or an answer that is not the Bot API's, such as a proxy's error
// page, may pass later), a success is not mistaken for a failure because its result is not
// what the bot expected (repeating the send would post the message twice), and no error
// carries the token.
func TestAnswersAreReadAsTgbotapiReadsThem(t *testing.T) {
	cases := []struct {
		name      string
		answer    string
		rateLimit time.Duration // the RateLimitError's wait, 0 for none
		temporary bool
		wantErr   bool
	}{
		{"success", `{"ok":true,"result":{"message_id":77,"text":"hi"}}`, 0, false, false},
		{"success, fields in another order", `{"result":{"text":"hi","message_id":77},"ok":true}` + "\n", 0, false, false},
		{"429 with retry_after", `429 {"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}`, 7 * time.Millisecond, false, true},
		{"502", `502 {"ok":false,"error_code":502,"description":"Bad Gateway"}`, 0, true, true},
		{"a proxy's error page", "502 <html><body>Bad gateway</body></html>", 0, true, true},
		{"an empty answer", "502 ", 0, true, true},
		{"the connection closed before an answer", closeConnection, 0, true, true},
		{"a refusal that names the token", `401 {"ok":false,"error_code":401,"description":"Unauthorized: ` + wireToken + `"}`, 0, false, true},
		{"success with a result of another shape", `{"ok":true,"result":true}`, 0, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := newWireServer(t, map[string]string{"sendMessage": c.answer})
			ad := newWireAdapter(t, ws, nil)
			m := &messenger{api: ad.api}
			ref, err := m.Send(context.Background(), chat.Ref{Platform: chat.Telegram, ChatID: "42"}, "hi", adapters.SendOptions{})
			if !c.wantErr {
				if err != nil || ref.ID != "77" {
					t.Fatalf("Send = %+v, %v; want message 77", ref, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Send succeeded on %s", c.answer)
			}
			if strings.Contains(err.Error(), wireToken) || strings.Contains(err.Error(), "WIRE-secret") {
				t.Errorf("the token is in the error: %v", err)
			}
			var rl *adapters.RateLimitError
			if got := errors.As(err, &rl); got != (c.rateLimit > 0) || got && rl.RetryAfter != c.rateLimit {
				t.Errorf("error %v: rate limit %v (%+v), want one of %v", err, got, rl, c.rateLimit)
			}
			if got := errors.Is(err, adapters.ErrTemporary); got != c.temporary {
				t.Errorf("error %v: temporary = %v, want %v", err, got, c.temporary)
			}
		})
	}
}

// FuzzEncodeForm checks the form body against what url.Values.Encode makes of the same
// parameters (tgbotapi's MakeRequest sends that).
func FuzzEncodeForm(f *testing.F) {
	f.Add("text", "Hello, **world** 🙂 & 100% = +~", "chat_id", "-100123")
	f.Add("", "", "a b", "\x00\xff/?#[]@!$'()*,;")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		p := tgbotapi.Params{k1: v1, k2: v2, "reply_markup": `{"inline_keyboard":[]}`}
		want := url.Values{}
		for k, v := range p {
			want.Set(k, v)
		}
		if got := string(encodeForm(p)); got != want.Encode() {
			t.Fatalf("encodeForm(%q) = %q, want %q", p, got, want.Encode())
		}
	})
}

// A busy bot keeps its connections to Telegram: two waves of sends to 20 chats at once open 20
// connections, the second wave reusing the first's, where Go's default transport kept 2 and
// opened a new connection, a TCP and TLS handshake with Telegram, for almost every send.
func TestABusyBotReusesItsConnectionsToTelegram(t *testing.T) {
	const chats = 20
	var gate sync.WaitGroup
	release := make(chan struct{})
	srv, err := tk.New(tk.Options{NoLimits: true, OnCall: func(c tk.Call) {
		if c.Method == "sendMessage" {
			gate.Done()
			<-release // each send of the wave is in flight at once, on its own connection
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ad, err := New(Options{Token: srv.Token(), APIEndpoint: srv.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	defer ad.Engine().Close()
	m := &messenger{api: ad.api}
	refs := make([]chat.Ref, chats)
	for i := range refs {
		srv.Send(tk.Inbound{Chat: tk.Chat{ID: int64(600 + i), Type: "private"}, From: ann, Text: "hi"})
		refs[i] = chat.Ref{Platform: chat.Telegram, ChatID: strconv.Itoa(600 + i)}
	}
	for wave := range 2 {
		gate.Add(chats)
		errs := make(chan error, chats)
		for _, ref := range refs {
			go func() {
				_, err := m.Send(context.Background(), ref, "answer", adapters.SendOptions{})
				errs <- err
			}()
		}
		gate.Wait()
		for range chats {
			release <- struct{}{}
		}
		for range chats {
			if err := <-errs; err != nil {
				t.Fatalf("wave %d: %v", wave, err)
			}
		}
	}
	if got := srv.Connections(); got != chats {
		t.Errorf("connections opened to Telegram for two waves of %d sends at once (and getMe) = %d, want %d: the second wave reuses the first's", chats, got, chats)
	}
}
