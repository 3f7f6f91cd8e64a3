-- Reward and moderation events (domain/events.py), each written in the transaction that
-- makes it happen, and their deliveries to each webhook endpoint (workers/webhooks.py).
-- `ready` is false while a window.frozen event waits for its archive's sha256 (set_archive);
-- `fanned` is true once its deliveries are made for the endpoints configured then.
CREATE TABLE webhook_events (
    id text PRIMARY KEY,
    type text NOT NULL,
    at double precision NOT NULL,
    data text NOT NULL,
    ready boolean NOT NULL DEFAULT true,
    fanned boolean NOT NULL DEFAULT false
);
CREATE INDEX webhook_events_new ON webhook_events (at) WHERE NOT fanned;

CREATE TABLE webhook_deliveries (
    event_id text NOT NULL,
    endpoint text NOT NULL,
    state text NOT NULL DEFAULT 'pending',
    attempts integer NOT NULL DEFAULT 0,
    first_at double precision NOT NULL,
    next_at double precision NOT NULL,
    last_status integer,
    last_error text,
    delivered_at double precision,
    PRIMARY KEY (event_id, endpoint)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_listed ON webhook_deliveries (first_at, event_id, endpoint);

CREATE FUNCTION podium_utc(t double precision) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(to_timestamp(floor(t)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- A flagged result and a ban are written by several paths (the record's function, its fast
-- path); a trigger makes their event part of the same insert, whichever path writes it. A
-- flagged result's id is its own key, so a result copied to another database (a bucket
-- moving) makes the same event id there, which a receiver dedupes; a ban is a new event
-- each time a player is banned again.
CREATE FUNCTION podium_flagged_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
CREATE TRIGGER results_flagged_event AFTER INSERT ON results
    FOR EACH ROW WHEN (NEW.flag IS NOT NULL) EXECUTE FUNCTION podium_flagged_event();

-- Only a new ban: an upsert that finds the player banned fires the update triggers.
CREATE FUNCTION podium_ban_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
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
CREATE TRIGGER bans_event AFTER INSERT ON bans
    FOR EACH ROW EXECUTE FUNCTION podium_ban_event();
