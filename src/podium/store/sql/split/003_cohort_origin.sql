-- On every database of a store split by player: cohorts are made on the database of the
-- player placed first in them, so each database suffixes the ids it makes with one of its
-- own ("2026-W44.gold-3x1f2e3d4c"), and two never make the same id.
UPDATE cohort_origin SET origin = 'x' || substr(md5(random()::text || clock_timestamp()::text), 1, 8)
WHERE origin = '';

-- A player's placements move with their bucket (store.split.move copies every table this
-- trigger guards); the cohorts' counts stay where the cohorts were made. Tiers live on the
-- home and do not move.
CREATE TRIGGER cohort_members_moved AFTER INSERT OR UPDATE OR DELETE ON cohort_members
    FOR EACH ROW EXECUTE FUNCTION podium_refuse_moved();
