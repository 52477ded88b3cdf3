// Package adapterstest holds what tests of the platform adapters need and production does not:
// a question book two adapters share in memory, standing in for two replicas on one database.
package adapterstest

import (
	"context"
	"errors"
	"sync"

	"relaybot/adapters"
)

// ErrUnreachable is Book.Press's error while the book is Down.
var ErrUnreachable = errors.New("adapterstest: the replica that asked does not answer")

// Book is an adapters.QuestionBook that adapters share in memory: a press one of them carries is
// settled by the question another one opened, as coord.Questions does through the database.
// Safe for concurrent use; the zero value is ready to use.
type Book struct {
	mu     sync.Mutex
	settle map[string]func(adapters.Press) adapters.Verdict
	chats  map[string]string // question id → its chat id
	down   bool
}

var _ adapters.QuestionBook = (*Book)(nil)

// Open implements adapters.QuestionBook.
func (b *Book) Open(_ context.Context, q adapters.BookedQuestion, settle func(adapters.Press) adapters.Verdict) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.settle == nil {
		b.settle, b.chats = map[string]func(adapters.Press) adapters.Verdict{}, map[string]string{}
	}
	b.settle[q.ID], b.chats[q.ID] = settle, q.Chat.ChatID
	return nil
}

// Posted implements adapters.QuestionBook.
func (b *Book) Posted(context.Context, string, string) {}

// Close implements adapters.QuestionBook.
func (b *Book) Close(_ context.Context, id string, _ bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.settle, id)
	delete(b.chats, id)
}

// Press implements adapters.QuestionBook: the question's settle decides; closed when no adapter
// holds the question open in the press's chat; ErrUnreachable while the book is down.
func (b *Book) Press(_ context.Context, p adapters.Press) (adapters.Verdict, error) {
	b.mu.Lock()
	settle, chatID, down := b.settle[p.Question], b.chats[p.Question], b.down
	b.mu.Unlock()
	switch {
	case down:
		return adapters.Verdict{}, ErrUnreachable
	case settle == nil || p.Chat.ChatID != "" && p.Chat.ChatID != chatID:
		return adapters.Verdict{Closed: true}, nil
	}
	return settle(p), nil
}

// Down makes the replica that asked unreachable (true) or reachable again.
func (b *Book) Down(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}
