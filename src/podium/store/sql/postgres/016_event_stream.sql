-- Events on the change log's stream (NATS), and old events pruned (domain/events.py).
-- `published` is true once the relay has put the event on the stream; events from before
-- the stream carried them are not sent there now.
ALTER TABLE webhook_events ADD COLUMN published boolean NOT NULL DEFAULT false;
UPDATE webhook_events SET published = true;
CREATE INDEX webhook_events_unpublished ON webhook_events (at) WHERE ready AND NOT published;
-- The pruner's walk: events by time.
CREATE INDEX webhook_events_at ON webhook_events (at);

-- A bucket moving copies its players' results and bans to another database (the mover's
-- transaction sets podium.moving): their events stay where they were written and are
-- delivered from there, so the copy writes none (a flagged result's would be a second
-- delivery of one id; a ban's a second event under a new id).
CREATE OR REPLACE FUNCTION podium_flagged_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('podium.moving', true) = 'on' THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_events (id, type, at, data) VALUES (
        'player.flagged:' || NEW.player_id || ':' || NEW.match_id,
        'player.flagged',
        NEW.recorded_at,
        json_build_object('playerId', NEW.player_id, 'matchId', NEW.match_id,
            'mode', NEW.mode, 'points', NEW.points, 'reason', NEW.flag,
            'endedAt', podium_utc(NEW.ended_at), 'at', podium_utc(NEW.recorded_at))::text
    ) ON CONFLICT (id) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION podium_ban_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('podium.moving', true) = 'on' THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_events (id, type, at, data) VALUES (
        'evt_' || replace(gen_random_uuid()::text, '-', ''),
        'player.banned',
        NEW.banned_at,
        json_build_object('playerId', NEW.player_id, 'reason', NEW.reason,
            'at', podium_utc(NEW.banned_at))::text
    );
    RETURN NULL;
END
$$;
