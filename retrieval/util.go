package retrieval

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
)

// sha256Hex is the first 16 hex digits of s's SHA-256: a name part made of safe characters.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// scanIDs reads a one-column result of ids and closes it.
func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("retrieval: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retrieval: %w", err)
	}
	return out, nil
}
