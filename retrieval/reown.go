package retrieval

import (
	"context"
	"fmt"
)

// Reown gives every text of owner from to owner to (a knowledge base renamed), keeping its
// vectors and codes: nothing is embedded again. The texts' rows and codes and, on SQLite, their
// keyword postings (whose words carry the owner's key) move in one transaction; both owners'
// generations move with it, so every replica's cache reads them again. It returns how many
// texts moved (0 when from has none: running it again after it succeeded is harmless).
func (x *Index) Reown(ctx context.Context, from, to string) (int64, error) {
	if from == "" || to == "" || from == to {
		return 0, fmt.Errorf("retrieval: reown %q to %q: want two different owners", from, to)
	}
	tx, err := x.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("retrieval: reown: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE retrieval_docs SET owner = $1 WHERE collection = $2 AND owner = $3`, to, x.collection, from)
	if err != nil {
		return 0, fmt.Errorf("retrieval: reown the texts of %s: %w", from, err)
	}
	moved, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("retrieval: reown the texts of %s: %w", from, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE retrieval_codes SET owner = $1 WHERE collection = $2 AND owner = $3`, to, x.collection, from); err != nil {
		return 0, fmt.Errorf("retrieval: reown the codes of %s: %w", from, err)
	}
	if x.dialect == SQLite && moved > 0 {
		if err := x.rekeyWords(ctx, tx, from, to); err != nil {
			return 0, fmt.Errorf("retrieval: reown the keywords of %s: %w", from, err)
		}
	}
	tx.owners[from], tx.owners[to] = true, true
	if err := tx.commit(ctx); err != nil {
		return 0, fmt.Errorf("retrieval: reown %s: %w", from, err)
	}
	return moved, nil
}

// rekeyWords writes again the keyword postings of the texts that were from's and are now to's:
// each word is prefixed with its owner's key (ownedWords). A text whose postings were written
// under another key (to's already) is left as it is.
func (x *Index) rekeyWords(ctx context.Context, tx *writeTx, from, to string) error {
	oldKey, newKey := x.ownerKey(from), x.ownerKey(to)
	rows, err := tx.QueryContext(ctx, `SELECT d.id, d.body FROM retrieval_docs d JOIN retrieval_docs_fts f ON f.docid = d.id
		WHERE d.collection = $1 AND d.owner = $2 AND f.owner_key = $3`, x.collection, to, oldKey)
	if err != nil {
		return err
	}
	type text struct {
		id   int64
		body string
	}
	var texts []text
	for rows.Next() {
		var t text
		if err := rows.Scan(&t.id, &t.body); err != nil {
			rows.Close()
			return err
		}
		texts = append(texts, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range texts {
		if _, err := tx.ExecContext(ctx, `DELETE FROM retrieval_docs_fts WHERE docid = $1`, t.id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO retrieval_docs_fts (docid, owner_key, body) VALUES ($1, $2, $3)`,
			t.id, newKey, ownedWords(newKey, t.body)); err != nil {
			return err
		}
	}
	return nil
}
