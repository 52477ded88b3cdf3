package retrieval

import (
	"context"
	"errors"
	"fmt"

	"relaybot/chat"
)

// Missing returns up to limit texts of the collection (any owner) with no vector in s, oldest
// first.
func (x *Index) Missing(ctx context.Context, s Space, limit int) ([]Doc, error) {
	rows, err := x.r.QueryContext(ctx, `SELECT d.item_id, d.owner, d.scope, d.body FROM retrieval_docs d
		WHERE d.collection = $1 AND NOT EXISTS (SELECT 1 FROM retrieval_vectors v WHERE v.doc_id = d.id AND v.model = $2 AND v.dims = $3)
		ORDER BY d.id LIMIT $4`, x.collection, s.Model, s.Dims, limit)
	if err != nil {
		return nil, fmt.Errorf("retrieval: texts without vectors: %w", err)
	}
	defer rows.Close()
	var out []Doc
	for rows.Next() {
		var d Doc
		if err := rows.Scan(&d.Item, &d.Owner, &d.Scope, &d.Text); err != nil {
			return nil, fmt.Errorf("retrieval: texts without vectors: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Progress counts the collection's texts and those with a vector in s.
func (x *Index) Progress(ctx context.Context, s Space) (done, total int, err error) {
	err = x.r.QueryRowContext(ctx, `SELECT COUNT(*),
		COUNT(*) FILTER (WHERE EXISTS (SELECT 1 FROM retrieval_vectors v WHERE v.doc_id = d.id AND v.model = $1 AND v.dims = $2))
		FROM retrieval_docs d WHERE d.collection = $3`, s.Model, s.Dims, x.collection).Scan(&total, &done)
	if err != nil {
		return 0, 0, fmt.Errorf("retrieval: progress: %w", err)
	}
	return done, total, nil
}

// DropOtherSpaces deletes the collection's vectors (and their codes) of every space but s.
func (x *Index) DropOtherSpaces(ctx context.Context, s Space) (int64, error) {
	tx, err := x.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("retrieval: drop old vectors: %w", err)
	}
	defer tx.Rollback()
	tx.all = true
	if _, err := tx.ExecContext(ctx, `DELETE FROM retrieval_codes WHERE collection = $1 AND NOT (model = $2 AND dims = $3)`,
		x.collection, s.Model, s.Dims); err != nil {
		return 0, fmt.Errorf("retrieval: drop old codes: %w", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM retrieval_vectors
		WHERE doc_id IN (SELECT id FROM retrieval_docs WHERE collection = $1) AND NOT (model = $2 AND dims = $3)`,
		x.collection, s.Model, s.Dims)
	if err != nil {
		return 0, fmt.Errorf("retrieval: drop old vectors: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("retrieval: drop old vectors: %w", err)
	}
	if err := tx.commit(ctx); err != nil {
		return 0, fmt.Errorf("retrieval: drop old vectors: %w", err)
	}
	return n, nil
}

// ErrFallbackAnswered stops a reindex when a fallback, not the primary endpoint, answered: its
// vectors would fill another model's space.
var ErrFallbackAnswered = errors.New("retrieval: the primary embeddings endpoint did not answer; reindex later")

// ReindexOptions tune Reindex.
type ReindexOptions struct {
	// Batch is how many texts are embedded per request (default 64).
	Batch int
	// Progress, when set, hears how many texts have a vector in the target space, of how many.
	Progress func(done, total int)
	// Calls, when set, is handed every embedding call's record (usage, the quotas).
	Calls func(ctx context.Context, owners []string, calls []chat.ModelCall)
}

// Reindex gives every text of x a vector in the primary endpoint's space, batch by batch, then
// drops the vectors of other spaces, and returns that space. It resumes where it stopped:
// texts that have a vector already are skipped.
func Reindex(ctx context.Context, x *Index, e *Embedder, o ReindexOptions) (Space, error) {
	if !e.Enabled() {
		return Space{}, errors.New("retrieval: no embeddings endpoint is configured")
	}
	if o.Batch <= 0 {
		o.Batch = 64
	}
	target, calls, err := e.Space(ctx)
	if o.Calls != nil && len(calls) > 0 {
		o.Calls(ctx, nil, calls)
	}
	if err != nil {
		return Space{}, err
	}
	for {
		docs, err := x.Missing(ctx, target, o.Batch)
		if err != nil {
			return target, err
		}
		if len(docs) == 0 {
			break
		}
		texts := make([]string, len(docs))
		items := make([]int64, len(docs))
		owners := make([]string, len(docs))
		for i, d := range docs {
			texts[i], items[i], owners[i] = d.Text, d.Item, d.Owner
		}
		emb, err := e.Embed(ctx, texts)
		if o.Calls != nil {
			o.Calls(ctx, owners, emb.Calls)
		}
		if err != nil {
			return target, err
		}
		if emb.Space != target {
			return target, ErrFallbackAnswered
		}
		if err := x.SetVectors(ctx, target, items, emb.Vectors); err != nil {
			return target, err
		}
		if o.Progress != nil {
			done, total, err := x.Progress(ctx, target)
			if err != nil {
				return target, err
			}
			o.Progress(done, total)
		}
	}
	if _, err := x.DropOtherSpaces(ctx, target); err != nil {
		return target, err
	}
	return target, nil
}
