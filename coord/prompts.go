package coord

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"relaybot/adapters"
	"relaybot/chat"
)

// Kinds of notification on questionChannel about reply prompts.
const (
	notePromptOpen   = "o" // a replica opened a reply prompt in chat C
	notePromptClosed = "c" // a replica closed its reply prompt in chat C
)

// promptReload is how often a replica reads again which chats have prompts open elsewhere:
// notifications keep it current meanwhile; the look again drops the prompts of replicas that
// died.
const promptReload = 30 * time.Second

// promptKey names a chat (its thread included) among the prompts open elsewhere.
func promptKey(ref chat.Ref) string {
	return string(ref.Platform) + "\x1f" + ref.ChatID + "\x1f" + ref.ThreadID
}

// carriedMessage is a message carried to the replica whose reply prompt is open in its chat:
// what the prompt reads of it (who sent it, whether they may answer, the text).
type carriedMessage struct {
	Chat      chat.Ref          `json:"chat"`
	Kind      adapters.ChatKind `json:"kind"`
	MessageID string            `json:"message"`
	UserID    string            `json:"user"`
	UserName  string            `json:"name"`
	ChatAdmin bool              `json:"chat_admin"`
	Roles     []string          `json:"roles,omitempty"`
	Text      string            `json:"text"`
}

func carried(in adapters.Inbound) carriedMessage {
	return carriedMessage{Chat: in.Chat, Kind: in.Kind, MessageID: in.MessageID, UserID: in.UserID, UserName: in.UserName,
		ChatAdmin: in.ChatAdmin, Roles: in.Roles, Text: in.Text}
}

func (m carriedMessage) inbound() adapters.Inbound {
	return adapters.Inbound{Chat: m.Chat, Kind: m.Kind, MessageID: m.MessageID, UserID: m.UserID, UserName: m.UserName,
		ChatAdmin: m.ChatAdmin, Roles: m.Roles, Text: m.Text, Time: time.Now()}
}

// OpenPrompt implements asking.PromptRelay: once the fence is open, the prompt is recorded
// under the epoch of ctx (refused with ErrTakenOver when this replica no longer holds it) and
// announced to the other replicas.
func (r *Replica) OpenPrompt(ctx context.Context, ref chat.Ref, take func(adapters.Inbound) bool) (string, error) {
	q := r.asks
	if err := q.member.Fence(ctx); err != nil {
		return "", err
	}
	b := make([]byte, 8)
	rand.Read(b) // crypto/rand.Read never fails on supported platforms
	id := "prompt-" + hex.EncodeToString(b)
	epoch, key := q.epochOf(ctx), promptKey(ref)
	q.mu.Lock()
	q.open[id] = &askedHere{epoch: epoch, take: take, chat: key}
	q.mu.Unlock()
	var n int
	err := q.db.QueryRowContext(ctx, `WITH i AS (INSERT INTO questions (id, kind, instance_id, epoch, bot, platform, chat_id, thread_id, text)
			SELECT $1, 'prompt', $2, $3, '', $4, $5, $6, '' WHERE EXISTS (SELECT 1 FROM instances WHERE id = $2 AND epoch = $3) RETURNING id)
		SELECT count(pg_notify(`+channelSQL("$7")+`, json_build_object('k', $8::text, 'q', i.id, 'c', $9::text, 'o', $2::text)::text)) FROM i`,
		id, q.member.ID(), epoch, string(ref.Platform), ref.ChatID, ref.ThreadID, questionChannel, notePromptOpen, key).Scan(&n)
	if err == nil && n == 0 {
		err = ErrTakenOver
	}
	if err != nil {
		q.forget(id)
		return "", fmt.Errorf("coord: record the reply prompt in %s: %w", ref, err)
	}
	return id, nil
}

// ClosePrompt implements asking.PromptRelay.
func (r *Replica) ClosePrompt(ctx context.Context, id string) {
	q := r.asks
	q.mu.Lock()
	asked := q.open[id]
	delete(q.open, id)
	q.mu.Unlock()
	if asked == nil {
		return
	}
	if _, err := q.db.ExecContext(ctx, `WITH u AS (UPDATE questions SET status = 'closed', closed_at = now() WHERE id = $1 AND status = 'open' RETURNING id)
		SELECT count(pg_notify(`+channelSQL("$2")+`, json_build_object('k', $3::text, 'q', u.id, 'c', $4::text, 'o', $5::text)::text)) FROM u`,
		id, questionChannel, notePromptClosed, asked.chat, q.member.ID()); err != nil {
		q.log.Warn("reply prompt's end not recorded; messages in its chat are carried to it until it is purged", "prompt", id, "err", err)
	}
}

// CarryAnswer implements asking.PromptRelay: a message in a chat where another replica has a
// reply prompt open (as this replica's listener knows, or the table says while it does not
// listen) is recorded as a press of that prompt, and the asker's verdict awaited.
func (r *Replica) CarryAnswer(ctx context.Context, in adapters.Inbound) (bool, error) {
	q := r.asks
	key := promptKey(in.Chat)
	q.mu.Lock()
	skip := q.listening && len(q.elsewhere[key]) == 0
	q.mu.Unlock()
	if skip {
		return false, nil
	}
	ans, err := json.Marshal(carried(in))
	if err != nil {
		return false, fmt.Errorf("coord: encode carried message: %w", err)
	}
	var id int64
	err = q.db.QueryRowContext(ctx, `WITH p AS (INSERT INTO question_presses (question_id, received_by, choice, message_id, answer)
			SELECT q.id, $4, 'text', $5, $6 FROM questions q JOIN instances i ON i.id = q.instance_id AND i.epoch = q.epoch
			WHERE q.kind = 'prompt' AND q.status = 'open' AND q.platform = $1 AND q.chat_id = $2 AND q.thread_id = $3
				AND q.instance_id <> $4
			ORDER BY q.created_at DESC LIMIT 1 RETURNING id, question_id)
		SELECT p.id FROM p, pg_notify(`+channelSQL("$7")+`, json_build_object('k', $8::text, 'q', p.question_id, 'p', p.id)::text)`,
		string(in.Chat.Platform), in.Chat.ChatID, in.Chat.ThreadID, q.member.ID(), in.MessageID, string(ans),
		questionChannel, notePress).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("coord: carry a message to the reply prompt in %s: %w", in.Chat, err)
	}
	v, err := q.await(ctx, id)
	if err != nil {
		return false, err
	}
	return v.Accepted, nil
}

// setListening is told whether notifications arrive; when they start (again), which chats have
// prompts open elsewhere is read from the table.
func (q *Questions) setListening(ctx context.Context, on bool) {
	if on {
		q.reloadPrompts(ctx)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.listening = on
}

// reloadPrompts reads which chats have prompts open on other live replicas.
func (q *Questions) reloadPrompts(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	rows, err := q.db.QueryContext(lctx, `SELECT q.id, q.platform, q.chat_id, q.thread_id FROM questions q
		JOIN instances i ON i.id = q.instance_id AND i.epoch = q.epoch
		WHERE q.kind = 'prompt' AND q.status = 'open' AND q.instance_id <> $1`, q.member.ID())
	if err != nil {
		q.log.Warn("question relay: reply prompts open elsewhere not read", "err", err)
		return
	}
	defer rows.Close()
	open := map[string]map[string]bool{}
	for rows.Next() {
		var ref chat.Ref
		var id, platform string
		if err := rows.Scan(&id, &platform, &ref.ChatID, &ref.ThreadID); err != nil {
			q.log.Warn("question relay: reply prompts open elsewhere not read", "err", err)
			return
		}
		ref.Platform = chat.Platform(platform)
		key := promptKey(ref)
		if open[key] == nil {
			open[key] = map[string]bool{}
		}
		open[key][id] = true
	}
	if rows.Err() != nil {
		q.log.Warn("question relay: reply prompts open elsewhere not read", "err", rows.Err())
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.elsewhere = open
}

// promptNoted records a prompt another replica opened or closed. Each is known by its id, so a
// notification that arrives after the table was read already says nothing twice.
func (q *Questions) promptNoted(n questionNote) {
	if n.Origin == q.member.ID() {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if n.Kind == notePromptOpen {
		if q.elsewhere[n.Chat] == nil {
			q.elsewhere[n.Chat] = map[string]bool{}
		}
		q.elsewhere[n.Chat][n.Question] = true
		return
	}
	delete(q.elsewhere[n.Chat], n.Question)
	if len(q.elsewhere[n.Chat]) == 0 {
		delete(q.elsewhere, n.Chat)
	}
}
