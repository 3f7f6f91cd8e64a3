-- Each process's roles say here when they last looped (workers/heartbeats.py), for
-- `podium status` in another process: a process's metrics are its own.
CREATE TABLE IF NOT EXISTS heartbeats (
    role TEXT NOT NULL,
    holder TEXT NOT NULL,
    at REAL NOT NULL,
    every_s REAL NOT NULL,
    PRIMARY KEY (role, holder)
);
