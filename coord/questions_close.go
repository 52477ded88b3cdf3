package coord

import (
	"context"
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
	if _, err := CloseGonePrompts(ctx, r.db); err != nil {
		return err
	}
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
