-- A player's erasure (issue 35). ``erased`` keeps the keyed hash (HMAC-SHA256 under
-- [store] erasure_secret) of every erased id, never the id: what refuses a later result and
-- what the updaters skip, as they skip bans. ``erasures`` is the durable record the eraser
-- carries out step by step; its ``player_id`` and ``pseudonym`` are cleared by the last
-- step, leaving when, by which key, and the counts of what was touched. Numbered after its
-- issue.
CREATE TABLE IF NOT EXISTS erased (
    digest      TEXT PRIMARY KEY,
    erased_at   REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS erasures (
    id            TEXT PRIMARY KEY,
    digest        TEXT NOT NULL,
    player_id     TEXT,
    pseudonym     TEXT NOT NULL,
    step          TEXT NOT NULL,
    requested_at  REAL NOT NULL,
    requested_by  TEXT NOT NULL,
    done_at       REAL,
    counts        TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS erasures_by_digest ON erasures (digest);
CREATE INDEX IF NOT EXISTS erasures_due ON erasures (requested_at) WHERE done_at IS NULL;
