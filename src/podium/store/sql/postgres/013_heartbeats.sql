-- Each process's roles say here when they last looped (workers/heartbeats.py), for
-- `podium status` in another process: a process's metrics are its own.
CREATE TABLE IF NOT EXISTS heartbeats (
    role text NOT NULL,
    holder text NOT NULL,
    at double precision NOT NULL,
    every_s double precision NOT NULL,
    PRIMARY KEY (role, holder)
);
