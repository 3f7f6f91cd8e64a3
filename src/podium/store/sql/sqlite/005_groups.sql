-- Boards split by a player attribute (group_by = "country"): the player's country, and
-- outbox rows that take a player off a group's board when they move to another group.
ALTER TABLE profiles ADD COLUMN country TEXT;
ALTER TABLE outbox ADD COLUMN removed INTEGER NOT NULL DEFAULT 0;
