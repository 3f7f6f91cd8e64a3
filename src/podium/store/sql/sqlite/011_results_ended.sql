-- Results leave the store by UTC day of their endedAt once past [store] keep_results_days
-- (workers/pruner.py): this is the order they are read in, a page at a time, and the
-- smallest endedAt is where the next day to prune starts.
CREATE INDEX IF NOT EXISTS results_ended ON results (ended_at, player_id, match_id);
