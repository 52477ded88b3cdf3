package store

import (
	"context"
	"fmt"
)

// HoldLease records that the replica instance now holds the named lease, replacing the record
// of an earlier holder. The record is for people (the admin pages): the lease itself is held
// elsewhere (coord).
func (s *LeaseQuery) HoldLease(ctx context.Context, instance, name string) error {
	err := s.w.WithContext(ctx).Exec(`INSERT INTO lease_holders (name, instance_id) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET instance_id = excluded.instance_id`, name, instance).Error
	if err != nil {
		return fmt.Errorf("store: record lease %s: %w", name, err)
	}
	return nil
}

// ReleaseLease deletes the record that instance holds the named lease; a record naming another
// holder (who took the lease since) stays.
func (s *LeaseQuery) ReleaseLease(ctx context.Context, instance, name string) error {
	err := s.w.WithContext(ctx).Exec(`DELETE FROM lease_holders WHERE name = ? AND instance_id = ?`, name, instance).Error
	if err != nil {
		return fmt.Errorf("store: record release of lease %s: %w", name, err)
	}
	return nil
}

// LeaseHolders returns the names of the leases each replica is recorded to hold, by replica id,
// names in order. Records of replicas that died stay until the next holder replaces them: read
// them for the live replicas only.
func (s *LeaseQuery) LeaseHolders(ctx context.Context) (map[string][]string, error) {
	var rows []struct {
		Name       string
		InstanceID string
	}
	if err := s.r.WithContext(ctx).Raw(`SELECT name, instance_id FROM lease_holders ORDER BY name`).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: lease holders: %w", err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.InstanceID] = append(out[r.InstanceID], r.Name)
	}
	return out, nil
}
