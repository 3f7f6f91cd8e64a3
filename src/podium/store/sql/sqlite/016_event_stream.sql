-- Events on the change log's stream (NATS), and old events pruned (domain/events.py).
-- `published` is 1 once the relay has put the event on the stream; events from before the
-- stream carried them are not sent there now. (SQLite has no bucket moves.)
ALTER TABLE webhook_events ADD COLUMN published INTEGER NOT NULL DEFAULT 0;
UPDATE webhook_events SET published = 1;
CREATE INDEX webhook_events_unpublished ON webhook_events (at) WHERE ready = 1 AND published = 0;
-- The pruner's walk: events by time.
CREATE INDEX webhook_events_at ON webhook_events (at);
