-- Both functions run with enable_seqscan off. PL/pgSQL keeps a generic plan per statement,
-- and one made while a table was new and empty scans it whole; on a fresh database that plan
-- stayed until autovacuum next analyzed the table (up to a minute), and Postgres went from
-- half a core to 1.1-1.4 cores at 500 results/s, reading 110 million tally rows in a few
-- seconds. Every statement here is a lookup by key, which an index always serves best.

-- The writes of one record: the result, each changed tally at its last value, and one
-- outbox row per change in fold order (ids follow the order). The locked path calls it too.
CREATE FUNCTION podium_write_record(
    p_player text, p_match text, p_key text, p_mode text, p_ended bigint, p_duration integer,
    p_points bigint, p_now double precision, p_flag text,
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[]
) RETURNS void LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
BEGIN
    INSERT INTO results (player_id, match_id, key_id, mode, ended_at, duration_s, points,
        recorded_at, flag)
    VALUES (p_player, p_match, p_key, p_mode, p_ended, p_duration, p_points, p_now, p_flag);
    INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, scored)
    SELECT b, w, p_player, t, r, v, s
    FROM unnest(w_boards, w_windows, w_totals, w_reached, w_versions, w_scored)
        AS u(b, w, t, r, v, s)
    ON CONFLICT (board, window_id, player_id) DO UPDATE SET total = excluded.total,
        reached_at = excluded.reached_at, version = excluded.version, scored = excluded.scored;
    INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, committed_at)
    SELECT b, w, p_player, t, r, v, p_now
    FROM unnest(o_boards, o_windows, o_totals, o_reached, o_versions)
        WITH ORDINALITY AS u(b, w, t, r, v, n)
    ORDER BY n;
END
$$;

-- One player's part of a match, written in one round trip from a state read before it.
--
-- The service reads every player's state for a match in one statement (prior_results) and
-- folds the result into it in Python. This function then takes the record's locks, checks
-- that nothing it was computed from has changed (each statement of a VOLATILE function sees
-- what committed before it started, so these reads come after the locks are granted), and
-- writes the result, the tallies and the outbox, as one autocommitted statement. When
-- anything changed it writes nothing and returns false, and the caller takes the locked
-- path, which reads again inside its transaction. The lock keys come from the caller, which
-- owns them (store/postgres.py).
CREATE FUNCTION podium_record_seen(
    p_player text, p_match text, p_key text, p_mode text, p_ended bigint, p_duration integer,
    p_points bigint, p_now double precision, p_flag text,
    -- the locks: the player's, then the shared window locks in key order
    p_player_ns integer, p_player_lock integer, p_window_ns integer, p_window_locks integer[],
    -- what the fold was computed from: the country (when a target is grouped), the count of
    -- results since p_since (when capped), and the tally of each open target (NULL: none)
    p_grouped boolean, p_country text, p_since double precision, p_count bigint,
    p_boards text[], p_windows text[], p_totals bigint[], p_reached bigint[],
    p_versions bigint[], p_scored boolean[],
    -- the writes, as podium_write_record takes them
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[]
) RETURNS boolean LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
    k integer;
BEGIN
    PERFORM pg_advisory_xact_lock(p_player_ns, p_player_lock);
    FOREACH k IN ARRAY p_window_locks LOOP
        PERFORM pg_advisory_xact_lock_shared(p_window_ns, k);
    END LOOP;

    IF EXISTS (SELECT 1 FROM results WHERE player_id = p_player AND match_id = p_match) THEN
        RETURN false;
    END IF;
    IF p_grouped AND (SELECT country FROM profiles WHERE player_id = p_player)
            IS DISTINCT FROM p_country THEN
        RETURN false;
    END IF;
    IF p_since IS NOT NULL AND (SELECT COUNT(*) FROM results WHERE player_id = p_player
            AND mode = p_mode AND recorded_at >= p_since) <> p_count THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_boards, p_windows) AS u(b, w)
            JOIN frozen_windows f ON f.board = u.b AND f.window_id = u.w) THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_boards, p_windows, p_totals, p_reached, p_versions,
                p_scored) AS u(b, w, t, r, v, s)
            LEFT JOIN tallies x ON x.board = u.b AND x.window_id = u.w
                AND x.player_id = p_player
            WHERE (x.total, x.reached_at, x.version, x.scored)
                IS DISTINCT FROM (u.t, u.r, u.v, u.s)) THEN
        RETURN false;
    END IF;

    PERFORM podium_write_record(p_player, p_match, p_key, p_mode, p_ended, p_duration,
        p_points, p_now, p_flag, w_boards, w_windows, w_totals, w_reached, w_versions,
        w_scored, o_boards, o_windows, o_totals, o_reached, o_versions);
    RETURN true;
END
$$;
