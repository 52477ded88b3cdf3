package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"golang.org/x/net/netutil"

	"relaybot/adapters"
)

// WebhookLimits bound what a client of the webhook server may hold. The server faces the
// internet, and anyone can open connections to it: without these, idle keep-alive connections
// and stalled requests stay open for ever. Zero fields take the defaults below.
type WebhookLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (default 30 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds answering a request, from the end of its headers (default 30 s).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new request (default 60 s).
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's headers (default 16 KiB); larger ones get 431.
	MaxHeaderBytes int
	// MaxBodyBytes caps an update (default 1 MiB); larger ones get 413.
	MaxBodyBytes int64
	// MaxConns caps the connections open at once (default 100; Telegram itself uses up to 40,
	// setWebhook's max_connections); more wait until one closes.
	MaxConns int
}

// withDefaults fills the zero fields of l.
func (l WebhookLimits) withDefaults() WebhookLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, 10*time.Second)
	def(&l.ReadTimeout, 30*time.Second)
	def(&l.WriteTimeout, 30*time.Second)
	def(&l.IdleTimeout, 60*time.Second)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 16 << 10
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 1 << 20
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 100
	}
	return l
}

// runWebhook sets the webhook and serves it, taking the updates Telegram posts until ctx ends.
func (a *Adapter) runWebhook(ctx context.Context, dispatch dispatcher, act actor) error {
	hookURL, err := url.Parse(a.opts.WebhookURL)
	if err != nil {
		return fmt.Errorf("telegram: webhook_url %q: %w", a.opts.WebhookURL, err)
	}
	lim := a.opts.Webhook.withDefaults()
	ln, err := a.listenWebhook(ctx, lim.MaxConns)
	if err != nil {
		return err
	}
	path := hookURL.Path
	if path == "" {
		path = "/"
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+path, &webhookHandler{a: a, maxBody: lim.MaxBodyBytes, dispatch: dispatch, act: act, seen: newRecentIDs(webhookSeenIDs)})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("telegram: webhook server: %w", err)
	}
}

// listenWebhook listens on webhook_listen, holding at most maxConns connections open, and tells
// Telegram where to post (setWebhook).
func (a *Adapter) listenWebhook(ctx context.Context, maxConns int) (net.Listener, error) {
	ln := a.opts.WebhookListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", a.opts.WebhookListen); err != nil {
			return nil, fmt.Errorf("telegram: webhook listen on %s: %w", a.opts.WebhookListen, err)
		}
	}
	// The address taken, which differs from webhook_listen's when that asks for port 0: a test or
	// a load tool starting replicas lets each pick a free port and reads it here.
	a.log.Info("telegram: webhook listening", "addr", ln.Addr().String())
	ln = netutil.LimitListener(ln, maxConns)
	p := tgbotapi.Params{"url": a.opts.WebhookURL, "secret_token": a.opts.WebhookSecret, "allowed_updates": allowedUpdates}
	if err := a.api.callInto(ctx, "setWebhook", p, nil); err != nil {
		ln.Close()
		return nil, fmt.Errorf("telegram: setWebhook: %w", err)
	}
	return ln, nil
}

// webhookHandler takes the updates Telegram posts to the webhook, each once. Telegram posts
// updates over several connections at once (max_connections), and retries an update the bot did
// not answer while newer ones go ahead: ids arrive out of order, so an update is a repeat only
// when its own id was taken before, not when a higher one was.
type webhookHandler struct {
	a        *Adapter
	maxBody  int64
	dispatch dispatcher
	act      actor

	mu   sync.Mutex // guards seen
	seen *recentIDs
}

// ServeHTTP takes one update: it refuses a request without the secret token, a body over the
// limit and an update it cannot decode, answers 503 for one it could not record (Telegram sends
// it again), and dispatches an update the first time it comes. Telegram posts a chat's next
// update only once this one is answered, and a load balancer may take it to another replica:
// with replicas sharing the bot, a message is answered once it has its place in the
// deployment's turn queue (at most adapters.PlaceWait, and while the request lasts), so the
// next one queues behind it wherever it lands.
func (h *webhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := h.a
	got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
	if subtle.ConstantTimeCompare([]byte(got), []byte(a.opts.WebhookSecret)) != 1 {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "update too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var u update
	if err := json.Unmarshal(raw, &u); err != nil {
		a.log.Warn("telegram: undecodable update refused", "err", err)
		http.Error(w, "bad update", http.StatusBadRequest)
		return
	}
	fresh, err := a.claim(r.Context(), u.UpdateID, raw, &h.mu, h.seen)
	if err != nil {
		// Telegram sends it again; whichever replica takes it then answers it.
		a.log.Warn("telegram: update not recorded; left for Telegram to resend", "update", u.UpdateID, "err", err)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if fresh && u.Message != nil { // Telegram re-sends an update it got no answer to: take it once
		// On disk before Telegram hears it arrived.
		a.take([]int64{u.UpdateID}, []json.RawMessage{raw}, 0)
		h.dispatchPlaced(r.Context(), u.UpdateID, u.Message)
	}
	if fresh && u.Message == nil && u.isAction() {
		h.act(&u)
	}
	w.WriteHeader(http.StatusOK)
}

// dispatchPlaced dispatches a message and, with replicas sharing the bot (a Ledger), returns
// once it has its place in its conversation's order, or adapters.PlaceWait passed, or ctx ended.
// A single process orders a chat's messages itself as they reach it.
func (h *webhookHandler) dispatchPlaced(ctx context.Context, id int64, m *message) {
	if h.a.opts.Ledger == nil {
		h.dispatch(id, m, 0, nil)
		return
	}
	pl := adapters.NewPlacement()
	began := time.Now()
	h.dispatch(id, m, 0, pl.Placed)
	if !pl.Wait(ctx, adapters.PlaceWait) {
		h.a.log.Warn("telegram: update answered before its message had its place in the turn queue; the chat's next message may run first",
			"update", id, "waited", time.Since(began).Round(time.Millisecond), "request_ended", ctx.Err() != nil)
	}
}

// claim reports whether update id is new: for the deployment, through the Ledger when replicas
// share one, else in this process's memory of recent ids.
func (a *Adapter) claim(ctx context.Context, id int64, raw []byte, mu *sync.Mutex, seen *recentIDs) (bool, error) {
	if a.opts.Ledger != nil {
		return a.claimShared(ctx, id, raw)
	}
	mu.Lock()
	defer mu.Unlock()
	return seen.add(id), nil
}

// webhookSeenIDs is how many recent update ids the webhook remembers to take each update once.
const webhookSeenIDs = 4096

// recentIDs remembers the last n distinct ids it was given.
type recentIDs struct {
	set  map[int64]struct{}
	ring []int64
	next int
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{set: make(map[int64]struct{}, n), ring: make([]int64, 0, n)}
}

// add records id and reports whether it is new.
func (r *recentIDs) add(id int64) bool {
	if _, ok := r.set[id]; ok {
		return false
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % len(r.ring)
	}
	r.set[id] = struct{}{}
	return true
}
