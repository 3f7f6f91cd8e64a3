-- Reward and moderation events (domain/events.py), each written in the transaction that
-- makes it happen, and their deliveries to each webhook endpoint (workers/webhooks.py).
-- `ready` is 0 while a window.frozen event waits for its archive's sha256 (set_archive);
-- `fanned` is 1 once its deliveries are made for the endpoints configured then.
CREATE TABLE webhook_events (
    id TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    at REAL NOT NULL,
    data TEXT NOT NULL,
    ready INTEGER NOT NULL DEFAULT 1,
    fanned INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX webhook_events_new ON webhook_events (at) WHERE fanned = 0;

CREATE TABLE webhook_deliveries (
    event_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    first_at REAL NOT NULL,
    next_at REAL NOT NULL,
    last_status INTEGER,
    last_error TEXT,
    delivered_at REAL,
    PRIMARY KEY (event_id, endpoint)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_listed ON webhook_deliveries (first_at, event_id, endpoint);

-- A flagged result and a ban are written by several paths; a trigger makes their event part
-- of the same insert, whichever path writes it. A flagged result's id is its own key, so a
-- result copied to another database (a bucket moving) makes the same event id there, which
-- a receiver dedupes; a ban is a new event each time a player is banned again.
CREATE TRIGGER results_flagged_event AFTER INSERT ON results WHEN NEW.flag IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO webhook_events (id, type, at, data) VALUES (
        'player.flagged:' || NEW.player_id || ':' || NEW.match_id,
        'player.flagged',
        NEW.recorded_at,
        json_object('playerId', NEW.player_id, 'matchId', NEW.match_id, 'mode', NEW.mode,
            'points', NEW.points, 'reason', NEW.flag,
            'endedAt', strftime('%Y-%m-%dT%H:%M:%SZ', NEW.ended_at, 'unixepoch'),
            'at', strftime('%Y-%m-%dT%H:%M:%SZ', CAST(NEW.recorded_at AS INTEGER), 'unixepoch'))
    );
END;

-- Only a new ban (an upsert that finds the player banned changes the reason: no event).
CREATE TRIGGER bans_event AFTER INSERT ON bans
BEGIN
    INSERT INTO webhook_events (id, type, at, data) VALUES (
        'evt_' || lower(hex(randomblob(16))),
        'player.banned',
        NEW.banned_at,
        json_object('playerId', NEW.player_id, 'reason', NEW.reason,
            'at', strftime('%Y-%m-%dT%H:%M:%SZ', CAST(NEW.banned_at AS INTEGER), 'unixepoch'))
    );
END;
