-- Who a freeze left out of a window's final standings: the players banned when it froze
-- (domain.plans.plan_freeze). A process whose archive directory lacks a frozen window's
-- file writes it again from the tallies, and must get the bytes the freeze's sha256 is of
-- whatever was banned or unbanned since: it leaves out these players, not today's bans.
-- One file, numbered apart, so that a branch adding a migration of its own does not meet it.
CREATE TABLE IF NOT EXISTS left_out (
    board       TEXT NOT NULL,
    window_id   TEXT NOT NULL,
    player_id   TEXT NOT NULL,
    PRIMARY KEY (board, window_id, player_id)
);
