#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- One member's score on a shard and the shard's generation marker, read in one atomic step:
-- a score read beside a marker that is there came from a board that held that
-- generation's data, so an estimated rank needs no second look at the markers (mending.py).
-- KEYS[1] the shard's part of a board (sorted set), KEYS[2] the shard's generation marker
-- ARGV[1] member
-- Returns {score or false, marker or false}.
return {redis.call('ZSCORE', KEYS[1], ARGV[1]), redis.call('GET', KEYS[2])}
