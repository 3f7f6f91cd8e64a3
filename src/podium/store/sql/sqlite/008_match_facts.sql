-- A match is a unit: once recorded, its mode, end and duration are fixed, stored with the
-- claim (NULL only on a claim that fixed none, from before this migration, with no results).
ALTER TABLE matches ADD COLUMN mode TEXT;
ALTER TABLE matches ADD COLUMN ended_at INTEGER;
ALTER TABLE matches ADD COLUMN duration_s INTEGER;
UPDATE matches SET
    mode = (SELECT mode FROM results r WHERE r.match_id = matches.match_id ORDER BY recorded_at LIMIT 1),
    ended_at = (SELECT ended_at FROM results r WHERE r.match_id = matches.match_id ORDER BY recorded_at LIMIT 1),
    duration_s = (SELECT duration_s FROM results r WHERE r.match_id = matches.match_id ORDER BY recorded_at LIMIT 1);
-- A rejected request releases the claim it made, if the match has no results: this finds them.
CREATE INDEX results_match ON results (match_id);
