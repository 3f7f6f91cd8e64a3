-- Tournaments asked by time, not walked (domain/tournaments.py): closes_at, when the last
-- run stops taking late results by the definition (Tournament.closes_at), so that the record
-- path reads the few still open (tournaments_live); settled_at, when the freezer found every
-- run frozen, well past the close, so that its walk leaves the tournament out from then on
-- (tournaments_unsettled); and the list paged by start (tournaments_by_start, and by
-- category). The fill below is Tournament.closes_at for the rows made before it (600: the
-- late time, FREEZE_AFTER_S; 253402300799: FOREVER). Numbered apart, as 015 is.
ALTER TABLE tournaments ADD COLUMN closes_at INTEGER NOT NULL DEFAULT 253402300799;
ALTER TABLE tournaments ADD COLUMN settled_at REAL;
UPDATE tournaments SET closes_at = CASE
    WHEN schedule IS NULL THEN ends_at + 600
    WHEN ends_at >= 253402300799 THEN 253402300799
    ELSE ends_at + duration_s + 600 END;
CREATE INDEX IF NOT EXISTS tournaments_live ON tournaments (closes_at) WHERE ended_early IS NULL;
CREATE INDEX IF NOT EXISTS tournaments_unsettled ON tournaments (starts_at, id)
    WHERE settled_at IS NULL;
CREATE INDEX IF NOT EXISTS tournaments_by_start ON tournaments (starts_at, id);
CREATE INDEX IF NOT EXISTS tournaments_by_category ON tournaments (category, starts_at, id);
