-- Results leave the store by UTC day of their endedAt once past [store] keep_results_days
-- (workers/pruner.py): this is the order they are read in, a page at a time, and the
-- smallest endedAt is where the next day to prune starts. Built in the migration's
-- transaction (CONCURRENTLY cannot run in one): on a large results table, run
-- CREATE INDEX CONCURRENTLY results_ended ... by hand first, and this finds it there.
-- The ids in byte order (COLLATE "C"), as a day file and the pruner's merge order them,
-- whatever the database's collation.
CREATE INDEX IF NOT EXISTS results_ended
    ON results (ended_at, player_id COLLATE "C", match_id COLLATE "C");
