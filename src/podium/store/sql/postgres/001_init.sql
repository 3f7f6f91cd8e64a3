-- podium schema v1 (PostgreSQL). Times are epoch seconds: bigint for game time, double for wall time.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    key_hash    text NOT NULL UNIQUE,      -- sha256 of the secret; the secret itself is never stored
    modes       text[] NOT NULL DEFAULT '{}',
    admin       boolean NOT NULL DEFAULT false,
    created_at  double precision NOT NULL
);

CREATE TABLE matches (                     -- a match id belongs to the server that first recorded it
    match_id    text PRIMARY KEY,
    key_id      text NOT NULL,
    recorded_at double precision NOT NULL
);

CREATE TABLE results (
    player_id   text NOT NULL,
    match_id    text NOT NULL,
    key_id      text NOT NULL,
    mode        text NOT NULL,
    ended_at    bigint NOT NULL,
    duration_s  integer NOT NULL,
    points      bigint NOT NULL,
    recorded_at double precision NOT NULL,
    PRIMARY KEY (player_id, match_id)
);
CREATE INDEX results_recent ON results (player_id, mode, recorded_at);

CREATE TABLE tallies (
    board       text NOT NULL,
    window_id   text NOT NULL,
    player_id   text NOT NULL,
    total       bigint NOT NULL,
    reached_at  bigint NOT NULL,
    version     bigint NOT NULL,
    PRIMARY KEY (board, window_id, player_id)
);
CREATE INDEX tallies_player ON tallies (player_id);

CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    board         text NOT NULL,
    window_id     text NOT NULL,
    player_id     text NOT NULL,
    total         bigint NOT NULL,
    reached_at    bigint NOT NULL,
    version       bigint NOT NULL,
    committed_at  double precision NOT NULL,
    claimed_until double precision NOT NULL DEFAULT 0   -- a lease, not a high-water mark
);
CREATE INDEX outbox_claimable ON outbox (claimed_until, id);

CREATE TABLE profiles (
    player_id   text PRIMARY KEY,
    name        text,
    avatar      text
);

CREATE TABLE friends (
    player_id   text NOT NULL,
    friend_id   text NOT NULL,
    PRIMARY KEY (player_id, friend_id)
);

CREATE TABLE bans (
    player_id   text PRIMARY KEY,
    reason      text NOT NULL,
    banned_at   double precision NOT NULL
);
