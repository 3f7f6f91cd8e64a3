-- Tournaments (domain/tournaments.py): definitions made by the admin, and who joined them.
-- Their standings are tallies of the board "~<id>", like any board window's. On a store
-- split by player only the home's are used (global rows, as keys). Numbered apart from the
-- store's other migrations so that a branch adding its own does not meet it.
CREATE TABLE IF NOT EXISTS tournaments (
    id            text PRIMARY KEY,
    title         text NOT NULL,
    modes         text[] NOT NULL,
    aggregate     text NOT NULL,
    sort_order    text NOT NULL,
    ties          text NOT NULL,
    starts_at     bigint NOT NULL,
    ends_at       bigint NOT NULL,
    join_required boolean NOT NULL,
    max_entrants  integer,
    max_attempts  integer,
    category      text,
    metadata      text,
    created_at    double precision NOT NULL,
    ended_early   double precision,
    entrants      integer NOT NULL DEFAULT 0,
    schedule      text,                   -- recurring: a cron expression (UTC)
    duration_s    integer                 -- recurring: each run's length
);
CREATE TABLE IF NOT EXISTS tournament_entrants (
    tournament_id text NOT NULL,
    player_id     text NOT NULL,
    joined_at     double precision NOT NULL,
    PRIMARY KEY (tournament_id, player_id)
);
