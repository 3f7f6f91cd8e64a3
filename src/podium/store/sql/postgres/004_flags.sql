-- Why a result deserves a look before prizes (domain/suspicion.py); NULL for most.
ALTER TABLE results ADD COLUMN flag text;
CREATE INDEX results_flagged ON results (recorded_at) WHERE flag IS NOT NULL;
