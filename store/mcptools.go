package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// mcpToolsRow is a row of mcp_server_tools (migration 00052): the tool names an MCP server
// listed last, as a JSON array.
type mcpToolsRow struct {
	Server    string `gorm:"primaryKey"`
	Names     string
	UpdatedMs int64 `gorm:"column:updated_ms"`
}

func (mcpToolsRow) TableName() string { return "mcp_server_tools" }

// RememberedTools returns the tool names server listed last on any replica; none when it never
// listed any.
func (s *MCPToolQuery) RememberedTools(ctx context.Context, server string) ([]string, error) {
	var row mcpToolsRow
	err := s.w.WithContext(ctx).Where("server = ?", server).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: remembered tools of MCP server %q: %w", server, err)
	}
	var names []string
	if err := json.Unmarshal([]byte(row.Names), &names); err != nil {
		return nil, fmt.Errorf("store: remembered tools of MCP server %q: %w", server, err)
	}
	return names, nil
}

// RememberTools keeps names as the tools server listed last, in place of any earlier list.
func (s *MCPToolQuery) RememberTools(ctx context.Context, server string, names []string) error {
	if names == nil {
		names = []string{}
	}
	b, _ := json.Marshal(names) // strings only: always encodes
	row := mcpToolsRow{Server: server, Names: string(b), UpdatedMs: time.Now().UnixMilli()}
	err := s.w.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "server"}},
		DoUpdates: clause.AssignmentColumns([]string{"names", "updated_ms"})}).Create(&row).Error
	if err != nil {
		return fmt.Errorf("store: remember tools of MCP server %q: %w", server, err)
	}
	return nil
}
