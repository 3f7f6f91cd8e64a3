-- Leagues (domain/cohorts.py): the cohorts of each league board window, who was placed in
-- which, and each player's tier. A cohort's standings are tallies of its own window of the
-- board ("2026-W44.gold-3"), its final standings a frozen window's. One file, numbered
-- apart, so that a branch adding a migration of its own does not meet it.
CREATE TABLE IF NOT EXISTS cohorts (
    board      text NOT NULL,
    window_id  text NOT NULL,             -- the board window ("2026-W44")
    tier       text NOT NULL,
    n          integer NOT NULL,          -- its number in the tier, in the order made
    cohort     text NOT NULL,             -- its window id ("2026-W44.gold-3")
    members    integer NOT NULL,
    PRIMARY KEY (board, window_id, tier, n)
);
CREATE UNIQUE INDEX IF NOT EXISTS cohorts_by_id ON cohorts (board, cohort);
CREATE TABLE IF NOT EXISTS cohort_members (
    board      text NOT NULL,
    window_id  text NOT NULL,
    player_id  text NOT NULL,
    cohort     text NOT NULL,
    placed_at  double precision NOT NULL,
    PRIMARY KEY (board, window_id, player_id)
);
CREATE INDEX IF NOT EXISTS cohort_members_by_cohort ON cohort_members (board, cohort);
-- Where a player stands on each league board: the tier their latest frozen cohort gave them.
CREATE TABLE IF NOT EXISTS league_tiers (
    board        text NOT NULL,
    player_id    text NOT NULL,
    tier         text NOT NULL,
    cohort       text NOT NULL,           -- the frozen cohort that decided it
    window_start bigint NOT NULL,        -- that cohort's window's start: a later one wins
    moved        text NOT NULL,           -- up, down or stay
    PRIMARY KEY (board, player_id)
);
CREATE INDEX IF NOT EXISTS league_tiers_by_player ON league_tiers (player_id);
-- The suffix of the cohort ids this database makes: empty on one database; on each
-- database of a store split by player, one of its own (sql/split).
CREATE TABLE IF NOT EXISTS cohort_origin (origin text NOT NULL);
INSERT INTO cohort_origin SELECT '' WHERE NOT EXISTS (SELECT 1 FROM cohort_origin);

-- Placements in one tier of one window queue on a lock held until their record commits,
-- so that none overfills a cohort; on Postgres that lock is striped by player (``stripe``,
-- store/postgres/cohorts.py), so that a window's first results place in parallel, each
-- stripe filling its cohorts first come. Numbers of stripe s: s + 1, s + 1 + stripes, ...
ALTER TABLE cohorts ADD COLUMN stripe integer NOT NULL DEFAULT 0;

-- A player's placement inside their record's transaction, in one round trip: theirs if a
-- record placed them already; none (NULL) for a retry of a result stored before they were
-- placed, or a frozen window; else, under the stripe's lock, the first cohort of the stripe
-- with room, or a new one. A volatile function's every statement sees what committed
-- before it began, so each read after the lock sees every placement before it. Its id is
-- built as domain.cohorts.cohort_id builds one.
CREATE FUNCTION podium_place_cohort(
    p_board text, p_window text, p_tier text, p_size integer, p_stripe integer,
    p_stripes integer, p_player text, p_match text, p_now double precision,
    p_ns integer, p_key integer
) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    found text;
    made integer;
    num integer;
BEGIN
    SELECT cohort INTO found FROM cohort_members
    WHERE board = p_board AND window_id = p_window AND player_id = p_player;
    IF found IS NOT NULL THEN
        RETURN found;
    END IF;
    IF EXISTS (SELECT 1 FROM results WHERE player_id = p_player AND match_id = p_match)
        OR EXISTS (SELECT 1 FROM frozen_windows WHERE board = p_board AND window_id = p_window)
    THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(p_ns, p_key);
    SELECT cohort INTO found FROM cohorts
    WHERE board = p_board AND window_id = p_window AND tier = p_tier AND stripe = p_stripe
        AND members < p_size
    ORDER BY n LIMIT 1;
    IF found IS NOT NULL THEN
        UPDATE cohorts SET members = members + 1 WHERE board = p_board AND cohort = found;
    ELSE
        SELECT count(*) INTO made FROM cohorts
        WHERE board = p_board AND window_id = p_window AND tier = p_tier AND stripe = p_stripe;
        num := p_stripe + 1 + p_stripes * made;
        found := p_window || '.' || p_tier || '-' || num::text
            || (SELECT origin FROM cohort_origin LIMIT 1);
        INSERT INTO cohorts (board, window_id, tier, n, cohort, members, stripe)
        VALUES (p_board, p_window, p_tier, num, found, 1, p_stripe);
    END IF;
    INSERT INTO cohort_members (board, window_id, player_id, cohort, placed_at)
    VALUES (p_board, p_window, p_player, found, p_now);
    RETURN found;
END
$$;
