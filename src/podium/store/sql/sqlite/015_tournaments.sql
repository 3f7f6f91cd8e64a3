-- Tournaments (domain/tournaments.py): definitions made by the admin, and who joined them.
-- Their standings are tallies of the board "~<id>", like any board window's. Numbered
-- apart from the store's other migrations so that a branch adding its own does not meet it.
CREATE TABLE IF NOT EXISTS tournaments (
    id            TEXT PRIMARY KEY,
    title         TEXT NOT NULL,
    modes         TEXT NOT NULL,          -- comma-separated mode names
    aggregate     TEXT NOT NULL,
    sort_order    TEXT NOT NULL,
    ties          TEXT NOT NULL,
    starts_at     INTEGER NOT NULL,
    ends_at       INTEGER NOT NULL,
    join_required INTEGER NOT NULL,
    max_entrants  INTEGER,
    max_attempts  INTEGER,
    category      TEXT,
    metadata      TEXT,
    created_at    REAL NOT NULL,
    ended_early   REAL,                   -- when DELETE ended it
    entrants      INTEGER NOT NULL DEFAULT 0,
    schedule      TEXT,                   -- recurring: a cron expression (UTC)
    duration_s    INTEGER                 -- recurring: each run's length
);
CREATE TABLE IF NOT EXISTS tournament_entrants (
    tournament_id TEXT NOT NULL,
    player_id     TEXT NOT NULL,
    joined_at     REAL NOT NULL,
    PRIMARY KEY (tournament_id, player_id)
);
