-- +goose Up
-- How many times survivors took a message over from replicas that died while answering it
-- (Ledger.Orphans), shared by all replicas: the second adoption gets a notice instead of a
-- third try, so a message that kills its replica does not go down a chain of survivors.
ALTER TABLE inbound_ledger ADD COLUMN adoptions INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE inbound_ledger DROP COLUMN adoptions;
