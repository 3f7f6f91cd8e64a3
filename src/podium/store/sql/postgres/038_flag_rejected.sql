-- A flagged result a moderator rejected: it stays, for the record, and no longer counts. The
-- tallies it counted in are recounted without it in the same transaction, and each recount
-- goes out as an outbox row marked ``replaces``: the updaters write it by its version (it may
-- lower a total that ``GT`` would keep), and the version stays as a floor under which no
-- older change of the player lands (``ports/store.py``, ``Moderation.reject_flag``).
ALTER TABLE results ADD COLUMN rejected_at double precision;
DROP INDEX IF EXISTS results_flagged;
CREATE INDEX results_flagged ON results (recorded_at)
    WHERE flag IS NOT NULL AND accepted_at IS NULL AND rejected_at IS NULL;
ALTER TABLE outbox ADD COLUMN replaces boolean NOT NULL DEFAULT false;
