-- A flagged result a moderator looked at and accepted: it keeps counting, as every flagged
-- result does, and leaves the review queue (``flagged`` lists only those not accepted). The
-- flag's reason stays, for the record. Numbered after its issue, so that a branch adding a
-- migration of its own does not meet it.
ALTER TABLE results ADD COLUMN accepted_at REAL;
DROP INDEX IF EXISTS results_flagged;
CREATE INDEX results_flagged ON results (recorded_at) WHERE flag IS NOT NULL AND accepted_at IS NULL;
