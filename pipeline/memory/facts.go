package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"relaybot/chat"
)

// Fact is one thing remembered about one person.
type Fact struct {
	ID  int64
	Who chat.User
	// Scope is where it may be recalled: "private", or the group chat's reference.
	Scope string
	// Chat is the chat it was learned in ("telegram:-100", "web:abc").
	Chat string
	Text string
	// SourceTurn and SourceMessage are the turn and the platform's message it came from (zero
	// and empty when an admin wrote it).
	SourceTurn    int64
	SourceMessage string
	// WrittenBy is the model that extracted it, or who wrote it by hand.
	WrittenBy string
	// Path is how it was written: extraction, tool, command or admin.
	Path      Path
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Path is how a fact was written or deleted, as the audit records say.
type Path string

// The paths.
const (
	PathExtraction Path = "extraction"
	PathTool       Path = "tool"
	PathCommand    Path = "command"
	PathAdmin      Path = "admin"
)

// AuditEntry is one memory write or delete: who, which fact, from which message, by which path.
// It keeps no text of the fact.
type AuditEntry struct {
	At            time.Time
	Who           chat.User
	FactID        int64
	Action        string // add, update or delete
	Path          Path
	Actor         string // the model, the person, or the admin
	SourceTurn    int64
	SourceMessage string
}

// ErrNotFound is a fact id that is not the person's (or is gone).
var ErrNotFound = errors.New("memory: no such fact")

// facts reads and writes memory_facts and memory_audit. Its queries name parameters $1, $2, ...
// in the order they first appear (SQLite numbers $N by appearance).
type facts struct {
	w, r *sql.DB
}

const factColumns = `id, platform, user_id, scope, chat, body, COALESCE(source_turn_id, 0), source_message, written_by, path, created_at, updated_at`

func scanFact(s interface{ Scan(...any) error }) (Fact, error) {
	var f Fact
	var path string
	err := s.Scan(&f.ID, &f.Who.Platform, &f.Who.ID, &f.Scope, &f.Chat, &f.Text, &f.SourceTurn, &f.SourceMessage,
		&f.WrittenBy, &path, &f.CreatedAt, &f.UpdatedAt)
	f.Path = Path(path)
	return f, err
}

// insert writes a new fact and its audit row, and returns its id.
func (q facts) insert(ctx context.Context, f Fact, actor string) (int64, error) {
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("memory: add a fact: %w", err)
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO memory_facts (platform, user_id, scope, chat, body, source_turn_id,
		source_message, written_by, path, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING id`,
		f.Who.Platform, f.Who.ID, f.Scope, f.Chat, f.Text, nullID(f.SourceTurn), f.SourceMessage, f.WrittenBy, string(f.Path), f.CreatedAt).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("memory: add a fact: %w", err)
	}
	if err := writeAudit(ctx, tx, f, id, "add", actor); err != nil {
		return 0, err
	}
	return id, tx.Commit()
}

// update replaces a fact's text (the person's own fact only) and records it.
func (q facts) update(ctx context.Context, f Fact, actor string) error {
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("memory: update fact %d: %w", f.ID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE memory_facts SET body = $1, source_turn_id = $2, source_message = $3,
		written_by = $4, updated_at = $5 WHERE id = $6 AND platform = $7 AND user_id = $8`,
		f.Text, nullID(f.SourceTurn), f.SourceMessage, f.WrittenBy, f.UpdatedAt, f.ID, f.Who.Platform, f.Who.ID)
	if err != nil {
		return fmt.Errorf("memory: update fact %d: %w", f.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	if err := writeAudit(ctx, tx, f, f.ID, "update", actor); err != nil {
		return err
	}
	return tx.Commit()
}

// remove deletes facts (the person's own only; a zero Person: anyone's, for admins) and records
// each delete; it returns the ids deleted.
func (q facts) remove(ctx context.Context, who chat.User, ids []int64, path Path, actor string, at time.Time) ([]int64, error) {
	tx, err := q.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("memory: delete facts: %w", err)
	}
	defer tx.Rollback()
	var gone []int64
	for _, id := range ids {
		f, err := scanFact(tx.QueryRowContext(ctx, `SELECT `+factColumns+` FROM memory_facts WHERE id = $1`, id))
		if errors.Is(err, sql.ErrNoRows) || err == nil && who != (chat.User{}) && f.Who != who {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("memory: delete fact %d: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM memory_facts WHERE id = $1`, id); err != nil {
			return nil, fmt.Errorf("memory: delete fact %d: %w", id, err)
		}
		f.Path, f.UpdatedAt = path, at
		if err := writeAudit(ctx, tx, f, id, "delete", actor); err != nil {
			return nil, err
		}
		gone = append(gone, id)
	}
	return gone, tx.Commit()
}

func writeAudit(ctx context.Context, tx *sql.Tx, f Fact, id int64, action, actor string) error {
	at := f.UpdatedAt
	if at.IsZero() {
		at = f.CreatedAt
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO memory_audit (at, platform, user_id, fact_id, action, path, actor,
		source_turn_id, source_message) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		at, f.Who.Platform, f.Who.ID, id, action, string(f.Path), actor, nullID(f.SourceTurn), f.SourceMessage)
	if err != nil {
		return fmt.Errorf("memory: audit %s of fact %d: %w", action, id, err)
	}
	return nil
}

// list returns a person's facts, oldest first.
func (q facts) list(ctx context.Context, who chat.User) ([]Fact, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT `+factColumns+` FROM memory_facts WHERE platform = $1 AND user_id = $2 ORDER BY id`,
		who.Platform, who.ID)
	if err != nil {
		return nil, fmt.Errorf("memory: list facts: %w", err)
	}
	return scanFacts(rows)
}

// get returns the facts of ids that are the person's, in the order of ids.
func (q facts) get(ctx context.Context, who chat.User, ids []int64) ([]Fact, error) {
	out := make([]Fact, 0, len(ids))
	for _, id := range ids {
		f, err := scanFact(q.r.QueryRowContext(ctx, `SELECT `+factColumns+` FROM memory_facts
			WHERE id = $1 AND platform = $2 AND user_id = $3`, id, who.Platform, who.ID))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("memory: read fact %d: %w", id, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// byID returns one fact, whoever's it is (admins).
func (q facts) byID(ctx context.Context, id int64) (Fact, error) {
	f, err := scanFact(q.r.QueryRowContext(ctx, `SELECT `+factColumns+` FROM memory_facts WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Fact{}, ErrNotFound
	}
	return f, err
}

// auditOf returns a person's audit entries, newest first (at most limit).
func (q facts) auditOf(ctx context.Context, who chat.User, limit int) ([]AuditEntry, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT at, platform, user_id, fact_id, action, path, actor, COALESCE(source_turn_id, 0), source_message
		FROM memory_audit WHERE platform = $1 AND user_id = $2 ORDER BY id DESC LIMIT $3`, who.Platform, who.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("memory: read the audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var path string
		if err := rows.Scan(&e.At, &e.Who.Platform, &e.Who.ID, &e.FactID, &e.Action, &path, &e.Actor, &e.SourceTurn, &e.SourceMessage); err != nil {
			return nil, fmt.Errorf("memory: read the audit: %w", err)
		}
		e.Path = Path(path)
		out = append(out, e)
	}
	return out, rows.Err()
}

// turnsOf returns the turns that wrote or changed the facts ids, as their audit entries say.
func (q facts) turnsOf(ctx context.Context, ids []int64) ([]int64, error) {
	var turns []int64
	seen := map[int64]bool{}
	for _, id := range ids {
		rows, err := q.w.QueryContext(ctx, `SELECT DISTINCT source_turn_id FROM memory_audit WHERE fact_id = $1 AND source_turn_id IS NOT NULL`, id)
		if err != nil {
			return nil, fmt.Errorf("memory: the turns of fact %d: %w", id, err)
		}
		for rows.Next() {
			var t int64
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return nil, fmt.Errorf("memory: the turns of fact %d: %w", id, err)
			}
			if !seen[t] {
				seen[t] = true
				turns = append(turns, t)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("memory: the turns of fact %d: %w", id, err)
		}
	}
	return turns, nil
}

func scanFacts(rows *sql.Rows) ([]Fact, error) {
	defer rows.Close()
	var out []Fact
	for rows.Next() {
		f, err := scanFact(rows)
		if err != nil {
			return nil, fmt.Errorf("memory: read facts: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}
