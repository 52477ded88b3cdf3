package coord

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"relaybot/adapters"
)

const (
	// questionChannel is the NOTIFY channel of presses carried between replicas: a press for
	// the replica that asked, a verdict for the replica that received the press.
	questionChannel = "relaybot_questions"
	// questionLook is how often a replica with open questions reads the presses for them that
	// it may have missed (a notification lost with a listener), and how often a replica
	// waiting for a verdict reads its press.
	questionLook = time.Second
	// questionKeep is how long a question that is over stays in the table.
	questionKeep = time.Hour
	// decideTimeout bounds the asker's handling of one press: the fence, the claim, the verdict.
	decideTimeout = 5 * time.Second
)

// Kinds of notification on questionChannel.
const (
	notePress   = "p" // a press of question Q, row P, for the replica that asked
	noteVerdict = "v" // the verdict on press P, for the replica that received it
)

// questionNote is one notification on questionChannel.
type questionNote struct {
	Kind     string `json:"k"`
	Question string `json:"q,omitempty"`
	Press    int64  `json:"p,omitempty"`
	// Chat and Origin are a prompt's chat (promptKey) and the replica that opened or closed it.
	Chat   string `json:"c,omitempty"`
	Origin string `json:"o,omitempty"`
}

// Statuses of a press row.
const (
	pressPending  = "pending"
	pressDeciding = "deciding"
	pressAccepted = "accepted"
	pressRefused  = "refused"
	pressClosed   = "closed"
	pressExpired  = "expired"
)

// Questions carries presses of question buttons between replicas (tables questions and
// question_presses, NOTIFY relaybot_questions). The replica whose turn asks records the question
// with its epoch; a replica receiving a press of a question it does not hold inserts the press
// (only while the question is open and its replica still holds the epoch it asked under) and
// waits for the verdict; the asker's listener hands the press to the question's settle function
// (the turn's rules decide there), and writes the verdict back under its epoch. Notifications
// only wake: each side also reads the table every second while it waits, so a press or verdict
// a dropped listener missed is still taken. Its methods are safe for concurrent use.
type Questions struct {
	db     *sql.DB
	member *Member
	log    *slog.Logger

	mu       sync.Mutex
	open     map[string]*askedHere // this replica's open questions, by id
	waiters  map[int64]chan struct{}
	deciding map[int64]bool // presses being decided here
	wake     chan struct{}  // a question opened: the look may start

	// listening says notifications arrive; elsewhere holds the prompts open on other replicas
	// by chat (promptKey) and id, as the table said when the listener connected and
	// notifications since, and reloaded every promptReload.
	listening bool
	elsewhere map[string]map[string]bool
}

// askedHere is a question this replica's turn asked.
type askedHere struct {
	epoch  int64
	settle func(adapters.Press) adapters.Verdict
	// take and chat, for a reply prompt: its taker of typed answers and its chat (promptKey).
	take func(adapters.Inbound) bool
	chat string
}

// NewQuestions returns the question relay of the replica m over db.
func NewQuestions(db *sql.DB, m *Member, log *slog.Logger) *Questions {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Questions{db: db, member: m, log: log, open: map[string]*askedHere{}, waiters: map[int64]chan struct{}{},
		deciding: map[int64]bool{}, wake: make(chan struct{}, 1), elsewhere: map[string]map[string]bool{}}
}

// Book returns the adapters.QuestionBook of bot.
func (q *Questions) Book(bot Bot) adapters.QuestionBook { return questionBook{q: q, bot: bot} }

// questionBook is Questions for one bot's adapter.
type questionBook struct {
	q   *Questions
	bot Bot
}

// epochOf is the epoch ctx was stamped with, or this registration's.
func (q *Questions) epochOf(ctx context.Context) int64 {
	if e, ok := ctx.Value(epochKey{}).(int64); ok {
		return e
	}
	return q.member.Epoch()
}

// Open implements adapters.QuestionBook: once the fence is open, the question is recorded under
// the epoch of ctx, refused with ErrTakenOver when this replica no longer holds that epoch.
func (b questionBook) Open(ctx context.Context, bq adapters.BookedQuestion, settle func(adapters.Press) adapters.Verdict) error {
	q := b.q
	if err := q.member.Fence(ctx); err != nil {
		return err
	}
	epoch := q.epochOf(ctx)
	q.mu.Lock()
	q.open[bq.ID] = &askedHere{epoch: epoch, settle: settle}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	res, err := q.db.ExecContext(ctx, `INSERT INTO questions (id, instance_id, epoch, bot, platform, chat_id, thread_id, text)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM instances WHERE id = $2 AND epoch = $3)`,
		bq.ID, q.member.ID(), epoch, b.bot.String(), string(bq.Chat.Platform), bq.Chat.ChatID, bq.Chat.ThreadID, bq.Text)
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			err = ErrTakenOver
		}
	}
	if err != nil {
		q.forget(bq.ID)
		return fmt.Errorf("coord: record question %s: %w", bq.ID, err)
	}
	return nil
}

// forget drops a question from this replica's open ones.
func (q *Questions) forget(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.open, id)
}

// Posted implements adapters.QuestionBook.
func (b questionBook) Posted(ctx context.Context, id, messageID string) {
	if _, err := b.q.db.ExecContext(ctx, `UPDATE questions SET message_id = $2 WHERE id = $1`, id, messageID); err != nil {
		b.q.log.Warn("question's message not recorded; should this replica be taken over it keeps its buttons", "question", id, "err", err)
	}
}

// Close implements adapters.QuestionBook.
func (b questionBook) Close(ctx context.Context, id string, answered bool) {
	b.q.forget(id)
	status := "closed"
	if answered {
		status = "answered"
	}
	if _, err := b.q.db.ExecContext(ctx, `UPDATE questions SET status = $2, closed_at = now() WHERE id = $1 AND status = 'open'`,
		id, status); err != nil {
		b.q.log.Warn("question's end not recorded; presses elsewhere wait for the verdict's deadline", "question", id, "err", err)
	}
}

// Press implements adapters.QuestionBook: the press is recorded only while its question is open
// and the replica that asked still holds the epoch it asked under (else it is closed), the
// asker is notified, and the verdict is awaited. Where the press was made (p.Answer.Chat) is
// checked by the asker (adapters.PressedIn), which refuses a press from another chat and
// records who tried.
func (b questionBook) Press(ctx context.Context, p adapters.Press) (adapters.Verdict, error) {
	q := b.q
	ans, err := json.Marshal(p.Answer)
	if err != nil {
		return adapters.Verdict{}, fmt.Errorf("coord: encode press: %w", err)
	}
	var id int64
	err = q.db.QueryRowContext(ctx, `WITH p AS (INSERT INTO question_presses (question_id, received_by, choice, message_id, answer)
			SELECT q.id, $2, $3, $4, $5 FROM questions q JOIN instances i ON i.id = q.instance_id AND i.epoch = q.epoch
			WHERE q.id = $1 AND q.bot = $6 AND q.status = 'open' RETURNING id, question_id)
		SELECT p.id FROM p, pg_notify(`+channelSQL("$7")+`, json_build_object('k', $8::text, 'q', p.question_id, 'p', p.id)::text)`,
		p.Question, q.member.ID(), p.Choice, p.MessageID, string(ans), b.bot.String(), questionChannel, notePress).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return adapters.Verdict{Closed: true}, nil
	}
	if err != nil {
		return adapters.Verdict{}, fmt.Errorf("coord: carry press of question %s: %w", p.Question, err)
	}
	return q.await(ctx, id)
}

// await waits for the verdict on press id: woken by its notification, and reading the row every
// questionLook regardless. A press whose question closed, or whose replica was taken over,
// before it was decided is closed. When ctx ends first the press expires, unless the asker is
// deciding it (then its verdict is awaited a little longer).
func (q *Questions) await(ctx context.Context, id int64) (adapters.Verdict, error) {
	ch := make(chan struct{}, 1)
	q.mu.Lock()
	q.waiters[id] = ch
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.waiters, id)
		q.mu.Unlock()
	}()
	t := time.NewTicker(questionLook)
	defer t.Stop()
	deadline, expire := ctx.Done(), false
	for {
		v, done, err := q.verdict(context.WithoutCancel(ctx), id, expire)
		if done || err != nil {
			return v, err
		}
		select {
		case <-ch:
		case <-t.C:
		case <-deadline:
			if expire {
				return adapters.Verdict{}, fmt.Errorf("coord: no verdict on press %d: the replica that asked is deciding it still", id)
			}
			// Expire the press if nobody took it; if the asker is deciding it, its verdict is
			// awaited a little longer.
			expire = true
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*questionLook)
			defer cancel()
			deadline = gctx.Done()
		}
	}
}

// verdict reads press id: done with its verdict once decided, or closed when its question is no
// longer open on a live replica; expire makes a press nobody took yet expire (it reports done
// with an error).
func (q *Questions) verdict(ctx context.Context, id int64, expire bool) (adapters.Verdict, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	var status, text string
	var live bool
	err := q.db.QueryRowContext(ctx, `SELECT p.status, p.verdict, q.status = 'open'
			AND EXISTS (SELECT 1 FROM instances i WHERE i.id = q.instance_id AND i.epoch = q.epoch)
		FROM question_presses p JOIN questions q ON q.id = p.question_id WHERE p.id = $1`, id).Scan(&status, &text, &live)
	if err != nil {
		return adapters.Verdict{}, false, fmt.Errorf("coord: read press %d: %w", id, err)
	}
	switch status {
	case pressAccepted:
		return adapters.Verdict{Accepted: true, Text: text}, true, nil
	case pressRefused:
		return adapters.Verdict{Text: text}, true, nil
	case pressClosed:
		return adapters.Verdict{Closed: true}, true, nil
	case pressPending:
		if !live || expire {
			to := pressClosed
			if live {
				to = pressExpired
			}
			res, err := q.db.ExecContext(ctx, `UPDATE question_presses SET status = $2, decided_at = now() WHERE id = $1 AND status = 'pending'`, id, to)
			if err != nil {
				return adapters.Verdict{}, false, fmt.Errorf("coord: close press %d: %w", id, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return adapters.Verdict{}, false, nil // the asker took it meanwhile: read again
			}
			if to == pressExpired {
				return adapters.Verdict{}, true, fmt.Errorf("coord: press %d: the replica that asked did not take it in time", id)
			}
			return adapters.Verdict{Closed: true}, true, nil
		}
	}
	return adapters.Verdict{}, false, nil
}

// Listen takes the presses carried here and the verdicts on the presses this replica carried,
// until ctx ends; while this replica has open questions it also reads, every questionLook, the
// presses for them a notification may not have announced.
func (q *Questions) Listen(ctx context.Context) error {
	go q.lookEvery(ctx)
	return listenLoopTold(ctx, q.db, questionChannel, "question presses", q.log, func(on bool) {
		q.setListening(ctx, on)
		if on {
			q.wakeAll()
		}
	}, func(payload string) {
		var n questionNote
		if err := json.Unmarshal([]byte(payload), &n); err != nil {
			q.log.Warn("question relay: undecodable notification skipped", "err", err)
			return
		}
		switch n.Kind {
		case notePress:
			q.mu.Lock()
			_, mine := q.open[n.Question]
			q.mu.Unlock()
			if mine {
				go q.decide(ctx, n.Press, n.Question)
			}
		case notePromptOpen, notePromptClosed:
			q.promptNoted(n)
		case noteVerdict:
			q.mu.Lock()
			ch := q.waiters[n.Press]
			q.mu.Unlock()
			if ch != nil {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	})
}

// wakeAll makes every waiter read its press and the look run: the listener (re)connected, and
// notifications sent before may be missed.
func (q *Questions) wakeAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ch := range q.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// lookEvery reads the pending presses of this replica's open questions every questionLook while
// it has any, until ctx ends.
func (q *Questions) lookEvery(ctx context.Context) {
	reloaded := time.Now()
	t := time.NewTicker(questionLook)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-q.wake:
		}
		if time.Since(reloaded) >= promptReload {
			reloaded = time.Now()
			q.reloadPrompts(ctx)
		}
		q.mu.Lock()
		var ids []string
		for id := range q.open {
			ids = append(ids, id)
		}
		q.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		if err := q.look(ctx, ids); err != nil && ctx.Err() == nil {
			q.log.Warn("question relay: pending presses not read", "err", err)
		}
	}
}

// look hands each pending press of questions ids to decide.
func (q *Questions) look(ctx context.Context, ids []string) error {
	lctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	rows, err := q.db.QueryContext(lctx, `SELECT id, question_id FROM question_presses WHERE question_id = ANY($1) AND status = 'pending'`, ids)
	if err != nil {
		return fmt.Errorf("coord: read pending presses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var qid string
		if err := rows.Scan(&id, &qid); err != nil {
			return fmt.Errorf("coord: read pending presses: %w", err)
		}
		go q.decide(ctx, id, qid)
	}
	return rows.Err()
}

// decide settles press id of question qid, which this replica asked: under the fence of the
// epoch the question was asked under (a replica taken over since settles nothing of it), the
// press is taken (pending → deciding, so it is decided once), handed to the question's settle
// function, and the verdict written back, under the same epoch, and notified to the replica
// that received the press.
func (q *Questions) decide(ctx context.Context, id int64, qid string) {
	q.mu.Lock()
	asked := q.open[qid]
	busy := q.deciding[id]
	if asked != nil && !busy {
		q.deciding[id] = true
	}
	q.mu.Unlock()
	if asked == nil || busy {
		return
	}
	defer func() {
		q.mu.Lock()
		delete(q.deciding, id)
		q.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, epochKey{}, asked.epoch), decideTimeout)
	defer cancel()
	if err := q.member.Fence(ctx); err != nil {
		if !errors.Is(err, ErrTakenOver) {
			q.log.Warn("question relay: press not decided yet: this replica is fenced", "press", id, "err", err)
		}
		return
	}
	var p adapters.Press
	var ans string
	err := q.db.QueryRowContext(ctx, `UPDATE question_presses SET status = 'deciding' WHERE id = $1 AND status = 'pending'
		RETURNING question_id, choice, message_id, answer`, id).Scan(&p.Question, &p.Choice, &p.MessageID, &ans)
	if errors.Is(err, sql.ErrNoRows) {
		return // taken by another look, or the receiver stopped waiting
	}
	var v adapters.Verdict
	if err == nil {
		v, err = asked.verdictOn(p, ans)
	}
	if err != nil {
		q.log.Warn("question relay: press not taken", "press", id, "err", err)
		return
	}
	status := pressRefused
	switch {
	case v.Closed:
		status = pressClosed
	case v.Accepted:
		status = pressAccepted
	}
	for try := 0; ; try++ {
		err = q.writeVerdict(ctx, id, status, v.Text, asked.epoch)
		if err == nil || errors.Is(err, ErrTakenOver) || try == 2 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		q.log.Warn("question relay: verdict not written back; the presser is told to press again", "press", id, "status", status, "err", err)
	}
}

// verdictOn settles press p, whose answer column is ans: a button's press by the question's
// settle function, a message carried to a reply prompt by its taker.
func (a *askedHere) verdictOn(p adapters.Press, ans string) (adapters.Verdict, error) {
	if a.take != nil {
		var in carriedMessage
		if err := json.Unmarshal([]byte(ans), &in); err != nil {
			return adapters.Verdict{}, fmt.Errorf("coord: decode carried message: %w", err)
		}
		return adapters.Verdict{Accepted: a.take(in.inbound())}, nil
	}
	if err := json.Unmarshal([]byte(ans), &p.Answer); err != nil {
		return adapters.Verdict{}, fmt.Errorf("coord: decode press: %w", err)
	}
	return a.settle(p), nil
}

// writeVerdict writes the verdict on press id under epoch and notifies the replica waiting.
func (q *Questions) writeVerdict(ctx context.Context, id int64, status, text string, epoch int64) error {
	var n int
	err := q.db.QueryRowContext(ctx, `WITH u AS (UPDATE question_presses SET status = $2, verdict = $3, decided_at = now()
			WHERE id = $1 AND status = 'deciding' AND EXISTS (SELECT 1 FROM instances WHERE id = $4 AND epoch = $5) RETURNING id, question_id)
		SELECT count(pg_notify(`+channelSQL("$6")+`, json_build_object('k', $7::text, 'q', u.question_id, 'p', u.id)::text)) FROM u`,
		id, status, text, q.member.ID(), epoch, questionChannel, noteVerdict).Scan(&n)
	if err != nil {
		return fmt.Errorf("coord: write verdict on press %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("coord: verdict on press %d: %w", id, ErrTakenOver)
	}
	return nil
}

// ClosedQuestion is the message of a question whose replica was taken over before its turn
// closed it.
type ClosedQuestion = LeftMessage

// CloseGone closes up to limit open questions of bot whose replica no longer holds the epoch
// they were asked under (taken over, or left), each for one survivor, once, and returns them:
// their messages are to say they closed unanswered and lose their buttons.
func CloseGone(ctx context.Context, db *sql.DB, bot Bot, limit int) ([]ClosedQuestion, error) {
	return takeLeft(ctx, db, "close the questions of replicas that are gone ("+bot.String()+")", `UPDATE questions SET status = 'closed', closed_at = now() WHERE id IN (
			SELECT q.id FROM questions q WHERE q.bot = $1 AND q.status = 'open'
			AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = q.instance_id AND i.epoch = q.epoch)
			ORDER BY q.created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING instance_id, platform, chat_id, thread_id, message_id, text`, bot.String(), limit)
}

// PurgeQuestions deletes the questions that have been over for longer than keep, with their
// presses, and reports how many.
func PurgeQuestions(ctx context.Context, db *sql.DB, keep time.Duration) (int64, error) {
	res, err := db.ExecContext(ctx, `DELETE FROM questions WHERE status <> 'open' AND closed_at < now() - make_interval(secs => $1)`, keep.Seconds())
	if err != nil {
		return 0, fmt.Errorf("coord: purge questions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
