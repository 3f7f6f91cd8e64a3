"""The statements of the record path, as SQL text (migration 006 holds the functions).

Each is one round trip: ``OPEN_MATCH`` claims the match and reads every player's state for
the checks (a record planned from that state is written by ``group.BATCH``);
``RECORD_READ`` and ``RECORD_WRITE`` are the locked path that reads again inside the
transaction.
"""

from __future__ import annotations

# (board, window_id) pairs passed as two parallel arrays $2 and $3.
PAIRS = "(board, window_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))"

# Everything a record decides on, in one statement after its locks: the result this match
# already has (key_id ... points, NULL when none); the count and oldest of the player's
# results in the mode since $4 (n, oldest; 0 when $4 is NULL); and per target, in the order
# of $5 and $6, whether its window is frozen and its tally, locked FOR UPDATE (frozen,
# totals, reached, versions, scored: arrays, an element NULL where there is no tally).
RECORD_READ = (
    "SELECT r.key_id, r.mode, r.ended_at, r.duration_s, r.points, r.metadata, cap.n, "
    "cap.oldest, t.* "
    "FROM (SELECT COUNT(*), MIN(recorded_at) FROM results "
    "  WHERE player_id = $1 AND mode = $3 AND recorded_at >= $4::float8) AS cap(n, oldest) "
    "CROSS JOIN (SELECT array_agg(f.board IS NOT NULL ORDER BY u.n), "
    "  array_agg(x.total ORDER BY u.n), array_agg(x.reached_at ORDER BY u.n), "
    "  array_agg(x.version ORDER BY u.n), array_agg(x.scored ORDER BY u.n) "
    "  FROM unnest($5::text[], $6::text[]) WITH ORDINALITY AS u(b, w, n) "
    "  LEFT JOIN frozen_windows f ON f.board = u.b AND f.window_id = u.w "
    "  LEFT JOIN LATERAL (SELECT total, reached_at, version, scored FROM tallies "
    "    WHERE board = u.b AND window_id = u.w AND player_id = $1 FOR UPDATE) AS x ON true"
    ") AS t(frozen, totals, reached, versions, scored) "
    "LEFT JOIN results r ON r.player_id = $1 AND r.match_id = $2"
)
# Every write of a record in one statement: the result, each changed tally at its last
# value ($10-$15), and one outbox row per change in fold order ($16-$20; migration 006), and
# the result's metadata, which each changed tally and outbox row takes too ($21; 010).
RECORD_WRITE = (
    "SELECT podium_write_record($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text[], "
    "$11::text[], $12::bigint[], $13::bigint[], $14::bigint[], $15::boolean[], $16::text[], "
    "$17::text[], $18::bigint[], $19::bigint[], $20::bigint[], $21::text)"
)
# RECORD_WRITE with a player's placement in a cohort of a league board window, in the same
# round trip, last before the commit (migration 017): the pending target's window ($33) in
# the tallies' and the outbox's windows is the cohort ``podium_place_cohort`` places the
# player in, with its arguments ($22-$32). So the tier's lock is held for this statement
# and the commit only.
RECORD_WRITE_PLACING = (
    "WITH placed AS MATERIALIZED (SELECT podium_place_cohort($22, $23, $24, $25::int, "
    "$26::int, $27::int, $28, $29, $30::float8, $31::int, $32::int) AS cohort) "
    "SELECT podium_write_record($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::text[], "
    "array_replace($11::text[], $33::text, (SELECT cohort FROM placed)), $12::bigint[], "
    "$13::bigint[], $14::bigint[], $15::boolean[], $16::text[], "
    "array_replace($17::text[], $33::text, (SELECT cohort FROM placed)), $18::bigint[], "
    "$19::bigint[], $20::bigint[], $21::text)"
)


# Claiming a match id, with the facts that fix it (mode, end, duration): the insert does
# nothing if the id has an owner. Selected after it: whether this statement claimed it, and
# the owner and facts (NULL when that was a concurrent claim this snapshot cannot see).
def claim_sql(match: str, key: str, now: str, mode: str, ended: str, duration: str) -> str:
    return (
        "WITH claimed AS (INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, "
        f"duration_s) VALUES ({match}, {key}, {now}, {mode}, {ended}, {duration}) "
        "ON CONFLICT (match_id) DO NOTHING "
        "RETURNING key_id, mode, ended_at, duration_s, recorded_at) "
    )


def owner_sql(match: str) -> str:
    def col(c: str) -> str:
        return (
            f"COALESCE((SELECT {c} FROM claimed), "
            f"(SELECT {c} FROM matches WHERE match_id = {match}))"
        )

    return (
        f"EXISTS (SELECT 1 FROM claimed) AS claimed, {col('key_id')} AS owner, "
        f"{col('mode')} AS m_mode, {col('ended_at')} AS m_ended, "
        f"{col('duration_s')} AS m_duration, {col('recorded_at')} AS m_at"
    )


CLAIM = f"{claim_sql('$1', '$2', '$3', '$4', '$5::bigint', '$6::int4')} SELECT {owner_sql('$1')}"
# A match's claim lock (migration 012): every record takes it shared, a release exclusively
# before its delete, so that the delete's snapshot, taken after it, sees every result of a
# record that began before it, and a record after it finds the claim gone (and claims again).
CLAIM_LOCK = "SELECT pg_advisory_xact_lock(1885601809, hashtext($1))"
# Undoing a claim a rejected request made (``release_match``): its own key and time, and no
# results (retry-safe: a second run finds nothing to delete). After ``CLAIM_LOCK``.
RELEASE = (
    "DELETE FROM matches WHERE match_id = $1 AND key_id = $2 AND recorded_at = $3 "
    "AND NOT EXISTS (SELECT 1 FROM results WHERE match_id = $1)"
)

# The claim written again, in a store split by player, on the match id's database after the
# record committed on the player's: under the match's lock ($1, $2), so that a release
# either saw the record's result or ran wholly before (and is undone here).
# The owner after it (NULL when the insert waited for a concurrent claim this statement's
# snapshot cannot see).
RECLAIM = (
    "WITH ins AS (INSERT INTO matches (match_id, key_id, recorded_at, mode, ended_at, "
    "duration_s) SELECT $3, $4, $5, $6, $7, $8 FROM (SELECT pg_advisory_xact_lock($1, $2)) AS l "
    "ON CONFLICT (match_id) DO NOTHING RETURNING key_id) "
    "SELECT COALESCE((SELECT key_id FROM ins), (SELECT key_id FROM matches WHERE match_id = $3))"
)
# Whether any database of a split store holds a result of a match (what a release asks of
# the databases apart from the claim's).
HAS_RESULTS = "SELECT EXISTS (SELECT 1 FROM results WHERE match_id = $1)"

# The checks before a match's writes, for every player (p) in one statement: the result this
# match already has (key_id ... points), the last $4 points in the mode (recent; a result a
# moderator rejected is no history of the player's), the count
# and oldest of results since $5 (n, oldest), the country, and with targets ($6-$8, grouped
# ones placed in the player's group as ``place_in_groups`` does, with $9 and $10), per target
# in order whether its window is frozen and its tally (as in RECORD_READ).
PRIOR_COLUMNS = (
    "p, e.key_id, e.mode, e.ended_at, e.duration_s, e.points, e.metadata, "
    "ARRAY(SELECT points FROM results WHERE player_id = p AND mode = $3 "
    "  AND rejected_at IS NULL ORDER BY ended_at DESC LIMIT $4) AS recent, "
    "cap.n, cap.oldest, pr.country, t.*"
)
PRIOR_FROM = (
    "FROM unnest($1::text[]) AS u0(p) "
    "LEFT JOIN results e ON e.player_id = p AND e.match_id = $2 "
    "LEFT JOIN profiles pr ON pr.player_id = p "
    "CROSS JOIN LATERAL (SELECT COUNT(*), MIN(recorded_at) FROM results "
    "  WHERE player_id = p AND mode = $3 AND recorded_at >= $5::float8) AS cap(n, oldest) "
    "CROSS JOIN LATERAL (SELECT array_agg(f.board IS NOT NULL ORDER BY u.n), "
    "  array_agg(x.total ORDER BY u.n), array_agg(x.reached_at ORDER BY u.n), "
    "  array_agg(x.version ORDER BY u.n), array_agg(x.scored ORDER BY u.n) "
    "  FROM unnest($6::text[], $7::text[], $8::boolean[]) WITH ORDINALITY AS u(b, w, g, n) "
    "  CROSS JOIN LATERAL (SELECT CASE WHEN u.g "
    "    THEN u.w || $9 || COALESCE(NULLIF(pr.country, ''), $10) ELSE u.w END) AS pl(w) "
    "  LEFT JOIN frozen_windows f ON f.board = u.b AND f.window_id = pl.w "
    "  LEFT JOIN tallies x ON x.board = u.b AND x.window_id = pl.w AND x.player_id = p"
    ") AS t(frozen, totals, reached, versions, scored)"
)
# The claim and the read in one statement, the claim's key, time, end and duration after
# the read's parameters ($11-$14); every row carries the claim's outcome.
OPEN_MATCH = (
    f"{claim_sql('$2', '$11', '$12', '$3', '$13::bigint', '$14::int4')} "
    f"SELECT {PRIOR_COLUMNS}, {owner_sql('$2')} {PRIOR_FROM}"
)
# The same, committing without waiting for its WAL flush (``Results.lazy_claims``): a claim
# needs no flush of its own where its match's records are written on the same database.
# Each record writes the claim again in its own transaction (``podium_write_record``), whose
# commit flushes the WAL up to it, and so the claim's commit before it: a claim is durable
# once any result of its match is, and one lost in a crash before that is the claim of a
# match with no result, which the next request of the match makes again.
OPEN_MATCH_LAZY = (
    f"{OPEN_MATCH} CROSS JOIN (SELECT set_config('synchronous_commit', 'off', true)) AS lazy(s)"
)
# The same read without the claim (``Results.read_players``), for a store split across
# databases: a match's players read where they live, its claim where its id maps to.
PRIOR = f"SELECT {PRIOR_COLUMNS} {PRIOR_FROM}"
