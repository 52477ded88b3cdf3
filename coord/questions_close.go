package coord

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"relaybot/adapters"
)

// closeQuestions closes the open questions that replicas which are gone left (CloseGone) and
// has each adapter edit their messages to say so, each on a goroutine of its own that Close
// waits for, like the replies marked interrupted.
func (r *Replica) closeQuestions(ctx context.Context) error {
	r.mu.Lock()
	closers := make(map[Bot]adapters.QuestionCloser, len(r.closers))
	for bot, c := range r.closers {
		closers[bot] = c
	}
	r.mu.Unlock()
	defer func() {
		// What no adapter here edits (reply prompts, the web chat's questions): closed, so
		// their presses are answered closed and the rows purged.
		edited := []string{}
		for bot := range closers {
			edited = append(edited, bot.String())
		}
		if _, err := CloseGoneUnedited(ctx, r.db, edited); err != nil {
			r.log.Warn("questions of replicas that are gone not closed", "err", err)
		}
	}()
	for bot, c := range closers {
		closed, err := CloseGone(ctx, r.db, bot, 100)
		if err != nil {
			return err
		}
		for _, cq := range closed {
			if cq.Message.ID == "" {
				continue // never posted
			}
			r.marks.Go(func() {
				mctx, cancel := context.WithTimeout(r.markCtx, time.Minute)
				defer cancel()
				c.CloseQuestion(mctx, cq.Message.Chat, cq.Message.ID, cq.Text+adapters.ClosedText)
				r.log.Info("closed the question of a replica that is gone", "chat", cq.Message.Chat.String(),
					"message", cq.Message.ID, "replica", cq.Instance)
			})
		}
	}
	return nil
}

// CloseGoneUnedited closes the open questions (reply prompts included) whose replica no longer
// holds the epoch they were asked under, except those of the bots edited (CloseGone closes
// those, editing their messages), and reports how many.
func CloseGoneUnedited(ctx context.Context, db *sql.DB, edited []string) (int64, error) {
	res, err := db.ExecContext(ctx, `UPDATE questions q SET status = 'closed', closed_at = now()
		WHERE q.status = 'open' AND (q.kind = 'prompt' OR NOT q.bot = ANY($1))
		AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = q.instance_id AND i.epoch = q.epoch)`, edited)
	if err != nil {
		return 0, fmt.Errorf("coord: close the questions of replicas that are gone: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
