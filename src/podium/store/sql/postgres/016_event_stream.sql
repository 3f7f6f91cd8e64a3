-- Events on the change log's stream (NATS), and old events pruned (domain/events.py).
-- `published` is true once the relay has put the event on the stream; events from before
-- the stream carried them are not sent there now.
ALTER TABLE webhook_events ADD COLUMN published boolean NOT NULL DEFAULT false;
UPDATE webhook_events SET published = true;
CREATE INDEX webhook_events_unpublished ON webhook_events (at) WHERE ready AND NOT published;
-- The pruner's walk: events by time.
CREATE INDEX webhook_events_at ON webhook_events (at);
