-- Group commit (store/postgres/group.py): several records in one statement, so one
-- transaction, one round trip and one WAL flush for all of them. Each element of the batch
-- is what podium_record_seen takes (010), its lock keys included.
CREATE TYPE podium_record AS (
    player text, match text, key text, mode text, ended bigint, duration integer,
    points bigint, now double precision, flag text,
    player_lock integer, window_locks integer[], grouped boolean, country text,
    since double precision, count bigint,
    boards text[], windows text[], totals bigint[], reached bigint[], versions bigint[],
    scored boolean[],
    w_boards text[], w_windows text[], w_totals bigint[], w_reached bigint[],
    w_versions bigint[], w_scored boolean[],
    o_boards text[], o_windows text[], o_totals bigint[], o_reached bigint[],
    o_versions bigint[], meta text
);

-- Every lock of the batch is taken first, in the order of store/postgres/locks.py: the
-- players' locks in key order, then the windows' shared locks in key order, then the
-- matches' shared claim locks (012's, namespace locks.CLAIM_NS) in key order. A record on
-- its own takes its locks in the same order, a freeze one window lock, a release one claim
-- lock, so no two transactions wait for each other in a circle; each record below takes
-- its locks again, which a transaction that holds them is granted at once.
--
-- Then each record in a block of its own (a subtransaction): a record that fails is undone
-- alone, and the others commit. Returned per record, in order: 't' (written), 'f' (nothing
-- written: what it was planned from changed, as podium_record_seen's false), or the
-- failure's SQLSTATE, a colon and its message (nothing of it written).
CREATE FUNCTION podium_record_batch(
    p_player_ns integer, p_window_ns integer, p_recs podium_record[]
) RETURNS text[] LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
    r podium_record;
    k integer;
    ok boolean;
    out text[] := '{}';
BEGIN
    FOR k IN SELECT DISTINCT x.player_lock FROM unnest(p_recs) AS x ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(p_player_ns, k);
    END LOOP;
    FOR k IN SELECT DISTINCT w FROM unnest(p_recs) AS x, unnest(x.window_locks) AS w
            ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock_shared(p_window_ns, k);
    END LOOP;
    FOR k IN SELECT DISTINCT hashtext(x.match) FROM unnest(p_recs) AS x ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock_shared(1885601809, k);
    END LOOP;
    FOREACH r IN ARRAY p_recs LOOP
        BEGIN
            ok := podium_record_seen(r.player, r.match, r.key, r.mode, r.ended, r.duration,
                r.points, r.now, r.flag, p_player_ns, r.player_lock, p_window_ns,
                r.window_locks, r.grouped, r.country, r.since, r.count, r.boards, r.windows,
                r.totals, r.reached, r.versions, r.scored, r.w_boards, r.w_windows,
                r.w_totals, r.w_reached, r.w_versions, r.w_scored, r.o_boards, r.o_windows,
                r.o_totals, r.o_reached, r.o_versions, r.meta);
            out := out || (CASE WHEN ok THEN 't' ELSE 'f' END);
        EXCEPTION WHEN OTHERS THEN
            out := out || (SQLSTATE || ':' || SQLERRM);
        END;
    END LOOP;
    RETURN out;
END
$$;
