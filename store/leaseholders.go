package store

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"
)

// leaseHolderRow is a row of lease_holders: who holds a named lease.
type leaseHolderRow struct {
	Name       string `gorm:"primaryKey"`
	InstanceID string
}

func (leaseHolderRow) TableName() string { return "lease_holders" }

// HoldLease records that the replica instance now holds the named lease, replacing the record
// of an earlier holder. The record is for people (the admin pages): the lease itself is held
// elsewhere (coord).
func (s *LeaseQuery) HoldLease(ctx context.Context, instance, name string) error {
	err := s.w.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "name"}},
		DoUpdates: clause.AssignmentColumns([]string{"instance_id"})}).
		Create(&leaseHolderRow{Name: name, InstanceID: instance}).Error
	if err != nil {
		return fmt.Errorf("store: record lease %s: %w", name, err)
	}
	return nil
}

// ReleaseLease deletes the record that instance holds the named lease; a record naming another
// holder (who took the lease since) stays.
func (s *LeaseQuery) ReleaseLease(ctx context.Context, instance, name string) error {
	err := s.w.WithContext(ctx).Where("name = ? AND instance_id = ?", name, instance).Delete(&leaseHolderRow{}).Error
	if err != nil {
		return fmt.Errorf("store: record release of lease %s: %w", name, err)
	}
	return nil
}

// LeaseHolders returns the names of the leases each replica is recorded to hold, by replica id,
// names in order. Records of replicas that died stay until the next holder replaces them: read
// them for the live replicas only.
func (s *LeaseQuery) LeaseHolders(ctx context.Context) (map[string][]string, error) {
	var rows []leaseHolderRow
	if err := s.r.WithContext(ctx).Select("name, instance_id").Order("name").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: lease holders: %w", err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.InstanceID] = append(out[r.InstanceID], r.Name)
	}
	return out, nil
}
