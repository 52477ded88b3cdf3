package retrieval

import (
	"context"
	"fmt"
	"strings"
)

// Texts returns the stored texts of items (those still there), by item: a consumer that keeps
// only its items' places (a knowledge base's chunks) reads their words from here.
func (x *Index) Texts(ctx context.Context, items []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(items))
	for len(items) > 0 {
		batch := items[:min(len(items), 200)]
		items = items[len(batch):]
		ph := make([]string, len(batch))
		args := []any{x.collection}
		for i, id := range batch {
			ph[i] = fmt.Sprintf("$%d", i+2)
			args = append(args, id)
		}
		rows, err := x.r.QueryContext(ctx, `SELECT item_id, body FROM retrieval_docs WHERE collection = $1 AND item_id IN (`+
			strings.Join(ph, ", ")+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("retrieval: read texts: %w", err)
		}
		for rows.Next() {
			var id int64
			var body string
			if err := rows.Scan(&id, &body); err != nil {
				rows.Close()
				return nil, fmt.Errorf("retrieval: read texts: %w", err)
			}
			out[id] = body
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("retrieval: read texts: %w", err)
		}
	}
	return out, nil
}
