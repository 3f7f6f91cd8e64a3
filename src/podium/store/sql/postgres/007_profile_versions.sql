-- Profiles carry a version, raised by every change. Each change also writes an outbox row
-- with no board (board = '') and that version, so the rank index keeps a copy of names and
-- avatars for its reads, and applies an older copy after a newer one never.
ALTER TABLE profiles ADD COLUMN version bigint NOT NULL DEFAULT 0;
