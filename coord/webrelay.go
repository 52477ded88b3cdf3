package coord

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

const (
	// webChannel is the NOTIFY channel of the web chat's relay.
	webChannel = "relaybot_web"
	// maxNotify is the longest NOTIFY payload PostgreSQL takes (it must be shorter than 8000
	// bytes); a longer notification goes through web_relay_events.
	maxNotify = 7999
	// webRecheck is how long what a replica learnt of the pages open elsewhere holds before it
	// asks the database again: notifications keep it current meanwhile, the look again drops
	// pages of replicas that died.
	webRecheck = 30 * time.Second
	// webKeep is how long a large event stays in web_relay_events for the replicas to read.
	webKeep = 5 * time.Minute
)

// Kinds of notification on webChannel.
const (
	webEvent  = "e" // an event for the replicas with a page of the chat open
	webOpened = "w" // a replica opened its first page of the chat
	webClosed = "u" // a replica closed its last page of the chat
)

// webNote is one notification on webChannel. Event is inline when the whole note fits in a
// NOTIFY payload; otherwise Row names it in web_relay_events.
type webNote struct {
	Origin string          `json:"o"`
	Chat   string          `json:"c"`
	Kind   string          `json:"k"`
	Event  json.RawMessage `json:"e,omitempty"`
	Row    int64           `json:"r,omitempty"`
}

// WebRelay carries the web chat's live events between replicas with LISTEN/NOTIFY, so that a
// page whose event stream is on one replica sees a turn another replica runs. A replica records
// in web_watchers the chats it has a page of open; a replica publishing an event of a chat
// sends it only when another live replica has a page of it open, which it learns from one
// query per chat every 30 s and from notifications in between. A chat with no page open
// elsewhere costs no statement per event. Its methods are safe for concurrent use.
type WebRelay struct {
	db       *sql.DB
	instance string
	log      *slog.Logger

	mu        sync.Mutex
	listening bool                       // notifications about pages opened elsewhere arrive
	epoch     uint64                     // bumped each time the listener (re)connects
	watching  map[string]int             // this replica's open pages, by chat
	others    map[string]*pagesElsewhere // what this replica knows of other replicas' pages
}

// pagesElsewhere is what a replica knows of the pages of one chat open on other replicas.
type pagesElsewhere struct {
	on     map[string]bool // replica ids with a page open
	loaded time.Time       // when the database was last asked; zero: never
	notes  uint64          // notifications about the chat taken since the relay began
}

// NewWebRelay returns the relay of the replica instance over db; log receives failures of the
// listener (nil discards them).
func NewWebRelay(db *sql.DB, instance string, log *slog.Logger) *WebRelay {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &WebRelay{db: db, instance: instance, log: log, watching: map[string]int{}, others: map[string]*pagesElsewhere{}}
}

// watchTimeout bounds each write of a chat's web_watchers row.
const watchTimeout = 5 * time.Second

// Watch records that this replica has a page of chatID open until unwatch is called; the first
// page of a chat costs a statement, and so does closing the last. unwatch may be called more
// than once. No lock is held across the statement: a page of another chat never waits for it.
func (r *WebRelay) Watch(ctx context.Context, chatID string) (unwatch func(), err error) {
	r.mu.Lock()
	r.watching[chatID]++
	first := r.watching[chatID] == 1
	r.mu.Unlock()
	if first {
		if err := r.settle(ctx, chatID, false); err != nil {
			r.dropPage(chatID) // its row was not written
			return nil, fmt.Errorf("coord: record the open page of web chat %s: %w", chatID, err)
		}
	}
	var once sync.Once
	return func() { once.Do(func() { r.unwatch(chatID) }) }, nil
}

// unwatch drops one open page of chatID, and its row with the last one.
func (r *WebRelay) unwatch(chatID string) {
	if !r.dropPage(chatID) {
		return
	}
	if err := r.settle(context.Background(), chatID, true); err != nil {
		// The row costs the others a NOTIFY per event until it is purged with this replica.
		r.log.Warn("web relay: closed page not recorded", "chat", chatID, "err", err)
	}
}

// settle writes chatID's web_watchers row (present while a page of it is open here) until what
// was written last matches the pages open now; wrote is what the row was. A page opening while
// the last one's row is being deleted (or the reverse) makes the later writer write again, so
// the row is never left deleted while a page is open.
func (r *WebRelay) settle(ctx context.Context, chatID string, wrote bool) error {
	for range 4 {
		r.mu.Lock()
		want := r.watching[chatID] > 0
		r.mu.Unlock()
		if want == wrote {
			return nil
		}
		if err := r.writeWatcher(ctx, chatID, want); err != nil {
			return err
		}
		wrote = want
	}
	return nil
}

// writeWatcher inserts (open) or deletes chatID's web_watchers row, telling the other replicas.
func (r *WebRelay) writeWatcher(ctx context.Context, chatID string, open bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), watchTimeout)
	defer cancel()
	kind, q := webOpened, `WITH w AS (INSERT INTO web_watchers (chat_id, instance_id) VALUES ($1, $2)
				ON CONFLICT (chat_id, instance_id) DO UPDATE SET since = now())
				SELECT pg_notify(`+channelSQL("$3")+`, $4)`
	if !open {
		kind, q = webClosed, `WITH w AS (DELETE FROM web_watchers WHERE chat_id = $1 AND instance_id = $2)
			SELECT pg_notify(`+channelSQL("$3")+`, $4)`
	}
	note, err := r.note(kind, chatID, nil)
	if err != nil {
		return err
	}
	_, err = r.db.ExecContext(ctx, q, chatID, r.instance, webChannel, note)
	return err
}

// dropPage counts one page of chatID less and reports whether it was the last.
func (r *WebRelay) dropPage(chatID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watching[chatID]--
	if r.watching[chatID] > 0 {
		return false
	}
	delete(r.watching, chatID)
	return true
}

// Publish sends event (JSON) to the other replicas that have a page of chatID open; with none,
// it returns without a statement (but one query per chat every 30 s to learn of them). An event
// too large for a notification is stored for a few minutes and its id notified instead.
func (r *WebRelay) Publish(ctx context.Context, chatID string, event []byte) error {
	open, err := r.openElsewhere(ctx, chatID)
	if err != nil {
		return err
	}
	if !open {
		return nil
	}
	return r.send(ctx, webEvent, chatID, event)
}

// Listen calls fn with each event another replica publishes for a chat this replica has a page
// of open, until ctx ends; and with a nil event when another replica
// opens its first page of a chat (its page may have missed what was sent just before). fn runs
// on the listener's goroutine, one call at a time in the order sent, and must not block. A lost
// connection is listened on again after a second; events sent meanwhile are missed. Listen also
// purges old large events and the pages of replicas that are gone, every minute.
func (r *WebRelay) Listen(ctx context.Context, fn func(chatID string, event []byte)) error {
	go r.purgeEvery(ctx, time.Minute)
	return listenLoopTold(ctx, r.db, webChannel, "web chat events", r.log, r.setListening, func(payload string) {
		var n webNote
		if err := json.Unmarshal([]byte(payload), &n); err != nil {
			r.log.Warn("web relay: undecodable notification skipped", "err", err)
			return
		}
		if n.Origin == r.instance {
			return
		}
		switch n.Kind {
		case webOpened, webClosed:
			r.learn(n)
			if n.Kind == webOpened {
				fn(n.Chat, nil)
			}
		case webEvent:
			r.mu.Lock()
			open := r.watching[n.Chat] > 0
			r.mu.Unlock()
			if !open {
				return
			}
			ev, err := r.eventOf(ctx, n)
			if err != nil {
				r.log.Warn("web relay: event lost", "chat", n.Chat, "err", err)
				return
			}
			fn(n.Chat, ev)
		}
	})
}

// setListening is told whether notifications arrive. Until they do (and after each
// reconnection), what was learnt of other replicas' pages may have missed one: it is forgotten.
func (r *WebRelay) setListening(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listening = on
	r.epoch++
	clear(r.others)
}

// learn records that the sender of n opened or closed a page of n.Chat.
func (r *WebRelay) learn(n webNote) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.others[n.Chat]
	if p == nil {
		// Never asked about: the database will say when an event of the chat is published.
		return
	}
	p.notes++
	if n.Kind == webOpened {
		p.on[n.Origin] = true
	} else {
		delete(p.on, n.Origin)
	}
}

// openElsewhere reports whether another live replica has a page of chatID open: from memory
// while it is fresh, else from web_watchers. Without a listener it answers yes (what it would
// learn is not known to be current).
func (r *WebRelay) openElsewhere(ctx context.Context, chatID string) (bool, error) {
	r.mu.Lock()
	if !r.listening {
		r.mu.Unlock()
		return true, nil
	}
	p := r.others[chatID]
	if p != nil && !p.loaded.IsZero() && time.Since(p.loaded) < webRecheck {
		open := len(p.on) > 0
		r.mu.Unlock()
		return open, nil
	}
	if p == nil {
		// Created before the query, so notifications arriving during it are kept.
		p = &pagesElsewhere{on: map[string]bool{}}
		r.others[chatID] = p
	}
	epoch, notes := r.epoch, p.notes
	r.mu.Unlock()

	rows, err := r.db.QueryContext(ctx, `SELECT w.instance_id FROM web_watchers w JOIN instances i ON i.id = w.instance_id
		WHERE w.chat_id = $1 AND w.instance_id <> $2 AND i.expires_at > now()`, chatID, r.instance)
	if err != nil {
		return false, fmt.Errorf("coord: pages of web chat %s open elsewhere: %w", chatID, err)
	}
	defer rows.Close()
	on := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return false, fmt.Errorf("coord: pages of web chat %s open elsewhere: %w", chatID, err)
		}
		on[id] = true
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("coord: pages of web chat %s open elsewhere: %w", chatID, err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.epoch != epoch {
		return true, nil // the listener reconnected meanwhile: ask again next time
	}
	p = r.others[chatID]
	if p == nil {
		return len(on) > 0, nil
	}
	if p.notes != notes {
		// A page opened or closed during the query: keep what the notifications said too
		// (a page closed may still be counted until the next look: a NOTIFY too many).
		for id := range p.on {
			on[id] = true
		}
	}
	p.on, p.loaded = on, time.Now()
	r.forgetStaleLocked()
	return len(on) > 0, nil
}

// forgetStaleLocked drops what is known of chats not asked about for a while, so the map
// holds only the chats with recent events. r.mu must be held.
func (r *WebRelay) forgetStaleLocked() {
	if len(r.others) < 1024 {
		return
	}
	for chat, p := range r.others {
		if !p.loaded.IsZero() && time.Since(p.loaded) > webRecheck {
			delete(r.others, chat)
		}
	}
}

// note encodes a notification of this replica.
func (r *WebRelay) note(kind, chatID string, event []byte) (string, error) {
	b, err := json.Marshal(webNote{Origin: r.instance, Chat: chatID, Kind: kind, Event: event})
	if err != nil {
		return "", fmt.Errorf("coord: encode web relay note: %w", err)
	}
	return string(b), nil
}

// send notifies kind with event inline, or stored in web_relay_events when too large.
func (r *WebRelay) send(ctx context.Context, kind, chatID string, event []byte) error {
	note, err := r.note(kind, chatID, event)
	if err != nil {
		return err
	}
	if len(note) <= maxNotify {
		if _, err := r.db.ExecContext(ctx, `SELECT pg_notify(`+channelSQL("$1")+`, $2)`, webChannel, note); err != nil {
			return fmt.Errorf("coord: relay web chat %s event: %w", chatID, err)
		}
		return nil
	}
	if _, err := r.db.ExecContext(ctx, `WITH ev AS (INSERT INTO web_relay_events (payload) VALUES ($1) RETURNING id)
		SELECT pg_notify(`+channelSQL("$2")+`, json_build_object('o', $3::text, 'c', $4::text, 'k', $5::text, 'r', ev.id)::text) FROM ev`,
		string(event), webChannel, r.instance, chatID, kind); err != nil {
		return fmt.Errorf("coord: relay web chat %s event of %d bytes: %w", chatID, len(event), err)
	}
	return nil
}

// eventOf returns the event n carries, reading it from web_relay_events when n names a row.
func (r *WebRelay) eventOf(ctx context.Context, n webNote) ([]byte, error) {
	if n.Row == 0 {
		return n.Event, nil
	}
	var payload string
	err := r.db.QueryRowContext(ctx, `SELECT payload FROM web_relay_events WHERE id = $1`, n.Row).Scan(&payload)
	if err != nil {
		return nil, fmt.Errorf("coord: read relayed web chat event %d: %w", n.Row, err)
	}
	return []byte(payload), nil
}

// purgeEvery purges every period until ctx ends.
func (r *WebRelay) purgeEvery(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.Purge(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("web relay: purge", "err", err)
		}
	}
}

// Purge deletes the large events older than a few minutes (every replica has read them) and
// the open pages recorded by replicas that are gone.
func (r *WebRelay) Purge(ctx context.Context) error {
	if _, err := r.db.ExecContext(ctx, `DELETE FROM web_relay_events WHERE created_at < now() - make_interval(secs => $1)`,
		webKeep.Seconds()); err != nil {
		return fmt.Errorf("coord: purge relayed web chat events: %w", err)
	}
	if _, err := r.db.ExecContext(ctx, `DELETE FROM web_watchers w
		WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = w.instance_id AND i.expires_at > now())`); err != nil {
		return fmt.Errorf("coord: purge the open web chat pages of replicas that are gone: %w", err)
	}
	return nil
}
