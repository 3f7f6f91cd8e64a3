-- Entry metadata (a JSON object of at most 512 bytes, canonical: domain/metadata.py): stored
-- with the result that carries it, on the tally that result changed (what a board entry
-- shows, and what a rebuild restores), and on the change the outbox sends to the index.
-- NULL where a result carried none, and on every row from before this migration. Text, not
-- jsonb: the canonical bytes are kept as they are, and nothing here looks inside them.
ALTER TABLE results ADD COLUMN metadata text;
ALTER TABLE tallies ADD COLUMN metadata text;
ALTER TABLE outbox ADD COLUMN metadata text;

-- The two record functions of 006 and 008, with the result's metadata as a last argument:
-- every tally a record changes takes the metadata of the result that changed it
-- (recording.step), so one value serves the result, each tally and each outbox row. The
-- older signatures stay for processes not yet upgraded (they write no metadata).
CREATE FUNCTION podium_write_record(
    p_player text, p_match text, p_key text, p_mode text, p_ended bigint, p_duration integer,
    p_points bigint, p_now double precision, p_flag text,
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[], p_meta text
) RETURNS void LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
BEGIN
    INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s)
    VALUES (p_match, p_key, p_now, p_mode, p_ended, p_duration)
    ON CONFLICT (match_id) DO NOTHING;
    INSERT INTO results (player_id, match_id, key_id, mode, ended_at, duration_s, points,
        recorded_at, flag, metadata)
    VALUES (p_player, p_match, p_key, p_mode, p_ended, p_duration, p_points, p_now, p_flag,
        p_meta);
    INSERT INTO tallies (board, window_id, player_id, total, reached_at, version, scored,
        metadata)
    SELECT b, w, p_player, t, r, v, s, p_meta
    FROM unnest(w_boards, w_windows, w_totals, w_reached, w_versions, w_scored)
        AS u(b, w, t, r, v, s)
    ON CONFLICT (board, window_id, player_id) DO UPDATE SET total = excluded.total,
        reached_at = excluded.reached_at, version = excluded.version, scored = excluded.scored,
        metadata = excluded.metadata;
    INSERT INTO outbox (board, window_id, player_id, total, reached_at, version, committed_at,
        metadata)
    SELECT b, w, p_player, t, r, v, p_now, p_meta
    FROM unnest(o_boards, o_windows, o_totals, o_reached, o_versions)
        WITH ORDINALITY AS u(b, w, t, r, v, n)
    ORDER BY n;
END
$$;

CREATE FUNCTION podium_record_seen(
    p_player text, p_match text, p_key text, p_mode text, p_ended bigint, p_duration integer,
    p_points bigint, p_now double precision, p_flag text,
    p_player_ns integer, p_player_lock integer, p_window_ns integer, p_window_locks integer[],
    p_grouped boolean, p_country text, p_since double precision, p_count bigint,
    p_boards text[], p_windows text[], p_totals bigint[], p_reached bigint[],
    p_versions bigint[], p_scored boolean[],
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[], p_meta text
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
        w_scored, o_boards, o_windows, o_totals, o_reached, o_versions, p_meta);
    RETURN true;
END
$$;
