-- Frozen windows and their final standings (down to the board's exact_top). Prizes are paid
-- from these and from the archive file, never from the live board.
CREATE TABLE frozen_windows (
    board       TEXT NOT NULL,
    window_id   TEXT NOT NULL,
    frozen_at   REAL NOT NULL,
    players     INTEGER NOT NULL,
    checksum    TEXT,                 -- sha256 of the archive file, once written
    archive     TEXT,                 -- its name under [archive] dir
    PRIMARY KEY (board, window_id)
);

CREATE TABLE final_standings (
    board       TEXT NOT NULL,
    window_id   TEXT NOT NULL,
    position    INTEGER NOT NULL,     -- 1, 2, 3, ... in board order
    rank        INTEGER NOT NULL,     -- shown rank (shared boards repeat it)
    player_id   TEXT NOT NULL,
    points      INTEGER NOT NULL,
    reached_at  INTEGER NOT NULL,
    PRIMARY KEY (board, window_id, position)
);
CREATE UNIQUE INDEX final_standings_player ON final_standings (board, window_id, player_id);
