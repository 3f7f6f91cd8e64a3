-- Entry metadata (a JSON object of at most 512 bytes, canonical: domain/metadata.py): stored
-- with the result that carries it, on the tally that result changed (what a board entry
-- shows, and what a rebuild restores), and on the change the outbox sends to the index.
-- NULL where a result carried none, and on every row from before this migration.
ALTER TABLE results ADD COLUMN metadata TEXT;
ALTER TABLE tallies ADD COLUMN metadata TEXT;
ALTER TABLE outbox ADD COLUMN metadata TEXT;
