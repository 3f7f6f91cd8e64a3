-- Frozen windows and their final standings (down to the board's exact_top). Prizes are paid
-- from these and from the archive file, never from the live board.
CREATE TABLE frozen_windows (
    board       text NOT NULL,
    window_id   text NOT NULL,
    frozen_at   double precision NOT NULL,
    players     bigint NOT NULL,
    checksum    text,                 -- sha256 of the archive file, once written
    archive     text,                 -- its name under [archive] dir
    PRIMARY KEY (board, window_id)
);

CREATE TABLE final_standings (
    board       text NOT NULL,
    window_id   text NOT NULL,
    position    integer NOT NULL,     -- 1, 2, 3, ... in board order
    rank        bigint NOT NULL,     -- shown rank (shared boards repeat it)
    player_id   text NOT NULL,
    points      bigint NOT NULL,
    reached_at  bigint NOT NULL,
    PRIMARY KEY (board, window_id, position)
);
CREATE UNIQUE INDEX final_standings_player ON final_standings (board, window_id, player_id);
