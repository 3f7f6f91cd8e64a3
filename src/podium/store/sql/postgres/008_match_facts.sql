-- A match is a unit: once recorded, its mode, end and duration are fixed, stored with the
-- claim (NULL only on a claim that fixed none, from before this migration, with no results).
ALTER TABLE matches ADD COLUMN mode text, ADD COLUMN ended_at bigint, ADD COLUMN duration_s integer;
UPDATE matches m SET mode = r.mode, ended_at = r.ended_at, duration_s = r.duration_s
FROM (SELECT DISTINCT ON (match_id) match_id, mode, ended_at, duration_s FROM results
      ORDER BY match_id, recorded_at) AS r
WHERE r.match_id = m.match_id;

-- A rejected request releases the claim it made, if the match has no results
-- (podium_release_match); this is what finds them.
CREATE INDEX results_match ON results (match_id);

-- The writes of one record, as in 006, and the claim again: a concurrent rejection of the
-- same match by the same key may have released the claim between this record's read and its
-- write, and a result is never stored without the claim that owns it. A no-op (one index
-- probe) when the claim is there.
CREATE OR REPLACE FUNCTION podium_write_record(
    p_player text, p_match text, p_key text, p_mode text, p_ended bigint, p_duration integer,
    p_points bigint, p_now double precision, p_flag text,
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[]
) RETURNS void LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
BEGIN
    INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, duration_s)
    VALUES (p_match, p_key, p_now, p_mode, p_ended, p_duration)
    ON CONFLICT (match_id) DO NOTHING;
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
