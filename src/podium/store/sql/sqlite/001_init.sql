-- podium schema v1 (SQLite). Times are epoch seconds: INTEGER for game time, REAL for wall time.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,      -- sha256 of the secret; the secret itself is never stored
    modes       TEXT NOT NULL DEFAULT '',  -- comma-separated mode names
    admin       INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL
);

CREATE TABLE matches (                     -- a match id belongs to the server that first recorded it
    match_id    TEXT PRIMARY KEY,
    key_id      TEXT NOT NULL,
    recorded_at REAL NOT NULL
);

CREATE TABLE results (
    player_id   TEXT NOT NULL,
    match_id    TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    mode        TEXT NOT NULL,
    ended_at    INTEGER NOT NULL,
    duration_s  INTEGER NOT NULL,
    points      INTEGER NOT NULL,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (player_id, match_id)
);
CREATE INDEX results_recent ON results (player_id, mode, recorded_at);

CREATE TABLE tallies (
    board       TEXT NOT NULL,
    window_id   TEXT NOT NULL,
    player_id   TEXT NOT NULL,
    total       INTEGER NOT NULL,
    reached_at  INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    PRIMARY KEY (board, window_id, player_id)
);
CREATE INDEX tallies_player ON tallies (player_id);

CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    board         TEXT NOT NULL,
    window_id     TEXT NOT NULL,
    player_id     TEXT NOT NULL,
    total         INTEGER NOT NULL,
    reached_at    INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    committed_at  REAL NOT NULL,
    claimed_until REAL NOT NULL DEFAULT 0   -- a lease, not a high-water mark
);
CREATE INDEX outbox_claimable ON outbox (claimed_until, id);

CREATE TABLE profiles (
    player_id   TEXT PRIMARY KEY,
    name        TEXT,
    avatar      TEXT
);

CREATE TABLE friends (
    player_id   TEXT NOT NULL,
    friend_id   TEXT NOT NULL,
    PRIMARY KEY (player_id, friend_id)
);

CREATE TABLE bans (
    player_id   TEXT PRIMARY KEY,
    reason      TEXT NOT NULL,
    banned_at   REAL NOT NULL
);
