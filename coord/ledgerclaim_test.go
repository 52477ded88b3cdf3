package coord

import (
	"context"
	"database/sql"
	"errors"
	"testing"
)

// joined is a replica joined on a fresh database, and the database's pool; it leaves at the
// test's end.
func joined(t *testing.T) (*sql.DB, *Member) {
	t.Helper()
	st, _ := pgStore(t, "")
	db := pool(t, st)
	m, err := Join(context.Background(), db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Leave(context.Background()) })
	return db, m
}

// TestAClaimWhoseRequestEndedStillLandsAndSaysSo: a webhook request the platform gave up on (its
// context ends as the replica, woken from a pause, takes the message) still takes the message
// and reports it taken, so the replica answers it; a second delivery of it (the platform sending
// it again) is then refused. A claim must never land unreported: the message would stay taken
// and unanswered. The ledger's done, likewise, is recorded with an ended context.
func TestAClaimWhoseRequestEndedStillLandsAndSaysSo(t *testing.T) {
	db, m := joined(t)
	l := NewLedger(db, m.ID()).fenced(m)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := l.ClaimPayload(ended, "telegram", "1000:9", []byte("{}")); err != nil || !ok {
		t.Fatalf("claim with an ended request: taken %v, err %v; want taken", ok, err)
	}
	if ok, err := l.ClaimPayload(context.Background(), "telegram", "1000:9", []byte("{}")); err != nil || ok {
		t.Fatalf("the message sent again: taken %v, err %v; want refused as taken", ok, err)
	}
	if err := l.Done(ended, "telegram", "1000:9"); err != nil {
		t.Fatal(err)
	}
	var done bool
	if err := db.QueryRow(`SELECT done FROM inbound_ledger WHERE platform = 'telegram' AND inbound_key = '1000:9'`).Scan(&done); err != nil || !done {
		t.Fatalf("done %v, err %v; want the message done", done, err)
	}
}

// A claim made while a survivor takes this replica's work over (the fence still open, its
// registration already gone) inserts nothing and must not pass for a repeat: the message would
// be answered by nobody. It fails, so the platform sends it again, and the next replica takes it.
func TestAClaimOfAReplicaTakenOverIsNotARepeat(t *testing.T) {
	db, m := joined(t)
	l := NewLedger(db, m.ID()).fenced(m)
	if _, err := db.Exec(`DELETE FROM instances WHERE id = $1`, m.ID()); err != nil {
		t.Fatal(err)
	}
	ok, err := l.ClaimPayload(context.Background(), "telegram", "1000:10", []byte("{}"))
	if ok || !errors.Is(err, ErrTakenOver) {
		t.Fatalf("claim of a replica taken over: taken %v, err %v; want ErrTakenOver", ok, err)
	}
	other, err := Join(context.Background(), db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Leave(context.Background()) })
	if ok, err := NewLedger(db, other.ID()).fenced(other).ClaimPayload(context.Background(), "telegram", "1000:10", []byte("{}")); err != nil || !ok {
		t.Fatalf("the message sent again to another replica: taken %v, err %v; want taken", ok, err)
	}
}
