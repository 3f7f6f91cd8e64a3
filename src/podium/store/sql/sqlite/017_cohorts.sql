-- Leagues (domain/cohorts.py): the cohorts of each league board window, who was placed in
-- which, and each player's tier. A cohort's standings are tallies of its own window of the
-- board ("2026-W44.gold-3"), its final standings a frozen window's. One file, numbered
-- apart, so that a branch adding a migration of its own does not meet it.
CREATE TABLE IF NOT EXISTS cohorts (
    board      TEXT NOT NULL,
    window_id  TEXT NOT NULL,             -- the board window ("2026-W44")
    tier       TEXT NOT NULL,
    n          INTEGER NOT NULL,          -- its number in the tier, in the order made
    cohort     TEXT NOT NULL,             -- its window id ("2026-W44.gold-3")
    members    INTEGER NOT NULL,
    PRIMARY KEY (board, window_id, tier, n)
);
CREATE UNIQUE INDEX IF NOT EXISTS cohorts_by_id ON cohorts (board, cohort);
CREATE TABLE IF NOT EXISTS cohort_members (
    board      TEXT NOT NULL,
    window_id  TEXT NOT NULL,
    player_id  TEXT NOT NULL,
    cohort     TEXT NOT NULL,
    placed_at  REAL NOT NULL,
    PRIMARY KEY (board, window_id, player_id)
);
CREATE INDEX IF NOT EXISTS cohort_members_by_cohort ON cohort_members (board, cohort);
-- Where a player stands on each league board: the tier their latest frozen cohort gave them.
CREATE TABLE IF NOT EXISTS league_tiers (
    board        TEXT NOT NULL,
    player_id    TEXT NOT NULL,
    tier         TEXT NOT NULL,
    cohort       TEXT NOT NULL,           -- the frozen cohort that decided it
    window_start INTEGER NOT NULL,        -- that cohort's window's start: a later one wins
    moved        TEXT NOT NULL,           -- up, down or stay
    PRIMARY KEY (board, player_id)
);
CREATE INDEX IF NOT EXISTS league_tiers_by_player ON league_tiers (player_id);
-- The suffix of the cohort ids this database makes: empty on one database; on each
-- database of a store split by player, one of its own (sql/split).
CREATE TABLE IF NOT EXISTS cohort_origin (origin TEXT NOT NULL);
INSERT INTO cohort_origin SELECT '' WHERE NOT EXISTS (SELECT 1 FROM cohort_origin);
