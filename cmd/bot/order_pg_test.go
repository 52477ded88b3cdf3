package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"relaybot/internal/testkit/llm"
	tgkit "relaybot/internal/testkit/telegram"
	"relaybot/internal/testkit/wait"
	"relaybot/store/storetest"
)

// heldFiles is the replicas' way to the testkit Telegram: it passes every request on, except
// getFile, which waits until release (a photo slow to fetch).
type heldFiles struct {
	srv     *httptest.Server
	release chan struct{}
	let     sync.Once
	held    atomic.Int64
}

// letGo lets the held getFile calls, and every later one, through.
func (h *heldFiles) letGo() { h.let.Do(func() { close(h.release) }) }

func newHeldFiles(t *testing.T, to string) *heldFiles {
	h := &heldFiles{release: make(chan struct{})}
	target, err := url.Parse(to)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/getFile") {
			h.held.Add(1)
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target.String()+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(h.letGo)
	return h
}

// TestAChatsSecondMessageOnAnotherReplicaWaitsForTheFirstHowEverSlowItsReplica: Telegram posts
// a chat's second message only once the webhook answered the first, and the load balancer takes
// the first to one replica and the second to another. The first is a photo whose download
// takes as long as the test says, so its replica is slow to queue it. The second replica still
// answers it only after the first: the first replica answered Telegram only once the message
// had its place in the deployment's turn queue. Before, it answered at once, the second reached
// the other replica while the first was still downloading its photo, found no earlier message
// queued and ran first. The photo's download is let go once the second message was answered
// (as it was before) or once the first replica's webhook is seen waiting for the message's
// place (as it is now), so both ways the test decides nothing by time.
func TestAChatsSecondMessageOnAnotherReplicaWaitsForTheFirstHowEverSlowItsReplica(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	e := newEnv(t)
	api := newHeldFiles(t, e.tg.BaseURL())
	var first atomic.Bool // the first update went to replica 0; every later one goes to replica 1
	addrs := []string{freeAddr(t), freeAddr(t)}
	proxy := switchProxy(t, func() string {
		if first.CompareAndSwap(false, true) {
			return addrs[0]
		}
		return addrs[1]
	})
	e.llm.SetHandler(func(r llm.Request) llm.Reply {
		switch last := lastUserText(r); {
		case strings.Contains(last, "first"):
			return llm.Text("A: first")
		default:
			return llm.Text("A: " + last)
		}
	})
	for _, addr := range addrs {
		cfg := telegramReplica(t, dsn, e, webhookAt(addr, proxy.URL+"/hook")...).
			set("telegram", "api_endpoint", api.srv.URL+"/bot%s/%s").parse(t)
		r := startReplica(t, cfg)
		wait.For(t, "the replica to listen for free conversations", func() bool {
			return strings.Contains(r.logs.String(), "listening for free conversations")
		})
	}
	const chat = 4100
	e.tg.Send(tgkit.Inbound{Chat: private(chat), From: user(chat), Text: "first", Photo: bytes.Repeat([]byte{0xff, 0xd8, 0xff}, 40)})
	e.say(chat, "second")
	wait.For(t, "the first replica to fetch the photo", func() bool { return api.held.Load() > 0 })
	wait.For(t, "the second message answered, or the first replica waiting for the first's place", func() bool {
		return slices.Contains(e.botTexts(chat), "A: second") || wait.Inside("webhookHandler).ServeHTTP", "adapters.(*Placement).Wait")
	})
	api.letGo()
	wait.For(t, "both messages answered", func() bool { return len(e.botTexts(chat)) >= 2 })
	if got := e.botTexts(chat); !slices.Equal(got, []string{"A: first", "A: second"}) {
		t.Errorf("answers %q, want the first message's, then the second's", got)
	}
}
