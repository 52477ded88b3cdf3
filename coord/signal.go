package coord

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// stopChannel is the NOTIFY channel of stop requests.
const stopChannel = "relaybot_stop"

// Stop is a request to stop the turn of one conversation, from the replica that got it (the
// user's /stop or Stop button) to the replica running the turn.
type Stop struct {
	// Key is the conversation's key (chat.Key.String()).
	Key string `json:"key"`
	// UserID is who asked; Admin says whether they may stop anyone's turn.
	UserID string `json:"user"`
	Admin  bool   `json:"admin"`
	// Interrupt says a newer message of the conversation replaces the turn (busy = "interrupt"):
	// the turn ends whoever asked for it.
	Interrupt bool `json:"interrupt,omitempty"`
}

// Signals carries stop requests between replicas with PostgreSQL's LISTEN/NOTIFY: a NOTIFY
// reaches every listening replica within milliseconds; the one running the turn acts on it. A
// stop for a turn that runs is stored as well (table stop_requests, for stopKeep), naming the
// turn's ticket in the conversation queue, so a replica whose listener was reconnecting when it
// was sent reads it when it listens again.
type Signals struct {
	db  *sql.DB
	log *slog.Logger
}

// NewSignals returns the signals over db; log receives listener failures (nil discards them).
func NewSignals(db *sql.DB, log *slog.Logger) *Signals {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Signals{db: db, log: log}
}

// stopKeep is how long a stored stop is kept: well past the few seconds a listener takes to
// find its connection lost and listen again.
const stopKeep = time.Minute

// storedStops bounds the reading of the stops a listener may have missed.
const storedStops = 5 * time.Second

// PublishStop sends a stop request to every replica, this one included, and stores it for the
// turn of the conversation that runs now, if one does, in the same statement.
func (s *Signals) PublishStop(ctx context.Context, key, userID string, admin bool) error {
	b, err := json.Marshal(Stop{Key: key, UserID: userID, Admin: admin})
	if err != nil {
		return fmt.Errorf("coord: publish stop: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `WITH kept AS (
			INSERT INTO stop_requests (ticket, conv_key, user_id, admin)
			SELECT seq, conv_key, $3, $4 FROM turn_queue WHERE conv_key = $1 AND state = 'running')
		SELECT pg_notify(`+channelSQL("$2")+`, $5)`, key, stopChannel, userID, admin, string(b)); err != nil {
		return fmt.Errorf("coord: publish stop: %w", err)
	}
	return nil
}

// ListenStops calls fn with every stop request published by any replica until ctx ends. A lost
// connection is re-established after a second; each time the listener listens (again) it first
// reads the stops stored for the turns this replica (instance) runs, which it may have missed
// meanwhile. A stop may so reach fn twice: stopping a turn twice is stopping it once.
func (s *Signals) ListenStops(ctx context.Context, instance string, fn func(Stop)) error {
	listening := func(on bool) {
		if on {
			s.missed(ctx, instance, fn)
		}
	}
	return listenLoopTold(ctx, s.db, stopChannel, "stop requests", s.log, listening, func(payload string) {
		var st Stop
		if err := json.Unmarshal([]byte(payload), &st); err != nil {
			s.log.Warn("stop signals: undecodable request skipped", "err", err)
			return
		}
		fn(st)
	})
}

// missed hands fn the stored stops of the turns instance runs.
func (s *Signals) missed(ctx context.Context, instance string, fn func(Stop)) {
	cctx, cancel := context.WithTimeout(ctx, storedStops)
	defer cancel()
	rows, err := s.db.QueryContext(cctx, `SELECT s.conv_key, s.user_id, s.admin, s.interrupt FROM stop_requests s
		JOIN turn_queue q ON q.seq = s.ticket AND q.state = 'running' AND q.instance_id = $1
		ORDER BY s.id`, instance)
	if err != nil {
		s.log.Warn("stop signals: the stops stored while listening again not read", "err", err)
		return
	}
	var stops []Stop
	for rows.Next() {
		var st Stop
		if err := rows.Scan(&st.Key, &st.UserID, &st.Admin, &st.Interrupt); err != nil {
			s.log.Warn("stop signals: the stops stored while listening again not read", "err", err)
			break
		}
		stops = append(stops, st)
	}
	rows.Close()
	for _, st := range stops {
		s.log.Info("stop signals: a stop stored while listening again", "conversation", st.Key)
		fn(st)
	}
}

// Purge drops the stored stops older than stopKeep.
func (s *Signals) Purge(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM stop_requests WHERE created_at < now() - make_interval(secs => $1)`,
		stopKeep.Seconds()); err != nil {
		return fmt.Errorf("coord: purge the stored stops: %w", err)
	}
	return nil
}

// listenCheck is how long a listener waits for a notification before it checks its connection
// with a ping, which must answer within listenPing: a connection lost without a word is found
// within about listenCheck+listenPing and listened on again a second later.
const (
	listenCheck = 3 * time.Second
	listenPing  = 2 * time.Second
)

// channelSQL is the SQL naming the NOTIFY channel param (a statement's text parameter, such as
// "$2") in the schema the statement runs in. LISTEN/NOTIFY channels belong to the database, not to
// a schema: deployments (or tests) sharing one database in schemas of their own would otherwise
// hear each other, and a /stop for a conversation in one would stop the turn of the conversation
// with the same key in another. A hash of the schema keeps the name within PostgreSQL's 63 bytes.
func channelSQL(param string) string {
	return "(" + param + "::text || '_' || left(md5(coalesce(current_schema(), '')), 12))"
}

// listenLoop hands the payload of every notification on channel (what it carries, for the log)
// to fn until ctx ends, listening
// again a second after a lost connection (notifications sent meanwhile are missed).
func listenLoop(ctx context.Context, db *sql.DB, channel, what string, log *slog.Logger, fn func(payload string)) error {
	return listenLoopTold(ctx, db, channel, what, log, nil, fn)
}

// listenLoopTold is listenLoop that tells listening (when not nil) true each time the LISTEN
// holds, before the first notification, and false when the connection is lost: notifications
// sent while it is false are missed.
func listenLoopTold(ctx context.Context, db *sql.DB, channel, what string, log *slog.Logger, listening func(bool), fn func(payload string)) error {
	for {
		err := listen(ctx, db, channel, what, log, listening, fn)
		if listening != nil {
			listening(false)
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Warn("notifications: listener lost; listening again", "channel", channel, "err", err)
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// listen holds one connection in LISTEN on channel and hands each notification to fn.
func listen(ctx context.Context, db *sql.DB, channel, what string, log *slog.Logger, listening func(bool), fn func(payload string)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("coord: listen on %s: %w", channel, err)
	}
	// The connection carries a LISTEN: it must not go back to the pool.
	defer discard(conn)
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("coord: listen on %s: not a pgx connection", channel)
		}
		pc := c.Conn()
		var scoped string
		if err := pc.QueryRow(ctx, "SELECT "+channelSQL("$1"), channel).Scan(&scoped); err != nil {
			return fmt.Errorf("coord: listen on %s: %w", channel, err)
		}
		if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{scoped}.Sanitize()); err != nil {
			return fmt.Errorf("coord: listen on %s: %w", channel, err)
		}
		log.Info("listening for "+what+" from other replicas", "channel", channel)
		if listening != nil {
			listening(true)
		}
		for {
			// Health-checked: a connection dropped without a word (a NAT or a failover that sends
			// no reset) would otherwise leave this replica deaf for good.
			wctx, cancel := context.WithTimeout(ctx, listenCheck)
			n, err := pc.WaitForNotification(wctx)
			quiet := wctx.Err() != nil && ctx.Err() == nil
			cancel()
			if err != nil && quiet {
				pctx, cancel := context.WithTimeout(ctx, listenPing)
				err = pc.Ping(pctx)
				cancel()
				if err == nil {
					continue
				}
			}
			if err != nil {
				return fmt.Errorf("coord: listen on %s: %w", channel, err)
			}
			fn(n.Payload)
		}
	})
}
