// Package adapterstest holds what tests of the platform adapters need and production does not:
// a question book two adapters share in memory, standing in for two replicas on one database.
package adapterstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	down   bool
}

var _ adapters.QuestionBook = (*Book)(nil)

// Open implements adapters.QuestionBook.
func (b *Book) Open(_ context.Context, q adapters.BookedQuestion, settle func(adapters.Press) adapters.Verdict) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.settle == nil {
		b.settle = map[string]func(adapters.Press) adapters.Verdict{}
	}
	b.settle[q.ID] = settle
	return nil
}

// Posted implements adapters.QuestionBook.
func (b *Book) Posted(context.Context, string, string) {}

// Close implements adapters.QuestionBook.
func (b *Book) Close(_ context.Context, id string, _ bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.settle, id)
}

// Press implements adapters.QuestionBook: the question's settle decides (it checks where the
// press was made); closed when no adapter holds the question open; ErrUnreachable while the
// book is down. The answer travels as JSON, as coord.Questions stores it.
func (b *Book) Press(_ context.Context, p adapters.Press) (adapters.Verdict, error) {
	b.mu.Lock()
	settle, down := b.settle[p.Question], b.down
	b.mu.Unlock()
	switch {
	case down:
		return adapters.Verdict{}, ErrUnreachable
	case settle == nil:
		return adapters.Verdict{Closed: true}, nil
	}
	raw, err := json.Marshal(p.Answer)
	if err != nil {
		return adapters.Verdict{}, fmt.Errorf("adapterstest: encode press: %w", err)
	}
	p.Answer = adapters.Answer{}
	if err := json.Unmarshal(raw, &p.Answer); err != nil {
		return adapters.Verdict{}, fmt.Errorf("adapterstest: decode press: %w", err)
	}
	return settle(p), nil
}

// Down makes the replica that asked unreachable (true) or reachable again.
func (b *Book) Down(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down = down
}
