-- The writes of one record, as in 008, with the match's claim held: the claim lock taken
-- shared (a release takes it exclusively before it looks for results, so it either sees this
-- record's result or ran wholly before it), the claim written again if a release removed it,
-- and the record refused (SQLSTATE PD002, nothing written) when the claim belongs to another
-- key: a claim whose request died before its writes is released once its lease is over, and
-- another key may claim the match then. A result is never stored under another key's claim.
-- The lock's namespace is store.postgres.locks.CLAIM_NS.
CREATE OR REPLACE FUNCTION podium_write_record(
    p_player text, p_match text, p_key text, p_mode text, p_ended bigint, p_duration integer,
    p_points bigint, p_now double precision, p_flag text,
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[]
) RETURNS void LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
    v_owner text;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1885601809, hashtext(p_match));
    INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s)
    VALUES (p_match, p_key, p_now, p_mode, p_ended, p_duration)
    ON CONFLICT (match_id) DO NOTHING;
    -- A statement of its own: it sees a concurrent claim the insert above waited for.
    SELECT key_id INTO v_owner FROM matches WHERE match_id = p_match;
    IF v_owner IS DISTINCT FROM p_key THEN
        RAISE EXCEPTION 'match % was recorded by another game server', p_match
            USING ERRCODE = 'PD002';
    END IF;
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

-- The same with the result's metadata (010's signature): what podium calls now; the one above
-- serves processes from before 010.
CREATE OR REPLACE FUNCTION podium_write_record(
    p_player text, p_match text, p_key text, p_mode text, p_ended bigint, p_duration integer,
    p_points bigint, p_now double precision, p_flag text,
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[], p_meta text
) RETURNS void LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
    v_owner text;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1885601809, hashtext(p_match));
    INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s)
    VALUES (p_match, p_key, p_now, p_mode, p_ended, p_duration)
    ON CONFLICT (match_id) DO NOTHING;
    -- A statement of its own: it sees a concurrent claim the insert above waited for.
    SELECT key_id INTO v_owner FROM matches WHERE match_id = p_match;
    IF v_owner IS DISTINCT FROM p_key THEN
        RAISE EXCEPTION 'match % was recorded by another game server', p_match
            USING ERRCODE = 'PD002';
    END IF;
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
