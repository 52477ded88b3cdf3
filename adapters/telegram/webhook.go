package telegram

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

func (a *Adapter) runWebhook(ctx context.Context, dispatch dispatcher) error {
	hookURL, err := url.Parse(a.opts.WebhookURL)
	if err != nil {
		return fmt.Errorf("telegram: webhook_url %q: %w", a.opts.WebhookURL, err)
	}
	ln, err := net.Listen("tcp", a.opts.WebhookListen)
	if err != nil {
		return fmt.Errorf("telegram: webhook listen on %s: %w", a.opts.WebhookListen, err)
	}
	p := tgbotapi.Params{"url": a.opts.WebhookURL, "secret_token": a.opts.WebhookSecret, "allowed_updates": `["message"]`}
	if _, err := a.api.call(ctx, "setWebhook", p); err != nil {
		ln.Close()
		return fmt.Errorf("telegram: setWebhook: %w", err)
	}
	// Telegram posts updates over several connections at once (max_connections), and retries an
	// update the bot did not answer while newer ones go ahead: ids arrive out of order, so an
	// update is a repeat only when its own id was taken before, not when a higher one was.
	var mu sync.Mutex
	seen := newRecentIDs(webhookSeenIDs)
	path := hookURL.Path
	if path == "" {
		path = "/"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("X-Telegram-Bot-Api-Secret-Token")
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.opts.WebhookSecret)) != 1 {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var u update
		if err := json.Unmarshal(raw, &u); err != nil {
			a.log.Warn("telegram: undecodable update refused", "err", err)
			http.Error(w, "bad update", http.StatusBadRequest)
			return
		}
		mu.Lock()
		dup := !seen.add(u.UpdateID)
		mu.Unlock()
		if !dup && u.Message != nil { // Telegram re-sends an update it got no answer to: take it once
			// On disk before Telegram hears it arrived.
			a.take([]int64{u.UpdateID}, []json.RawMessage{raw}, 0)
			dispatch(u.UpdateID, u.Message, false)
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
