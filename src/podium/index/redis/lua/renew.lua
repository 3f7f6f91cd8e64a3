-- Mark a board window's counts on one shard as a new generation, in one atomic step: what
-- the mender does to a shard whose node took over after a failover, or lost its data, before
-- the log is applied again (workers/mender.py). Such a node may lack the last writes of the
-- old one, which no move it holds describes, and its 'n' may climb past the one the
-- aggregator counted at before the aggregator looks again; a 'g' other than the one the
-- aggregator and readers hold makes both count that shard afresh (recount.lua,
-- domain/changes.py), as a rebuild's swap does (swap.lua).
-- KEYS[1] the board window's tallies (write.lua), KEYS[2] its list of moves (write.lua)
-- ARGV[1] how far 'g' moves: drawn by the caller, not one, since the node that took over may
-- lack an earlier move of 'g' that one more would only repeat (domain/changes.py RENEWAL);
-- ARGV[2] the window's expire-at epoch seconds, or '' (then the expiry held is left)
-- A window with no tallies on this node gets them here: 'n' 1 and the new 'g' are unlike
-- any the aggregator holds, however many writes follow before it looks.
local MOVES_KEPT = 2048 -- domain/recount.py; trimmed as write.lua trims
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HINCRBY', KEYS[1], 'g', ARGV[1])
local held = redis.call('RPUSH', KEYS[2], 'g')
if held > 2 * MOVES_KEPT then redis.call('LTRIM', KEYS[2], -MOVES_KEPT, -1) end
if ARGV[2] ~= '' then
  redis.call('EXPIREAT', KEYS[1], ARGV[2])
  redis.call('EXPIREAT', KEYS[2], ARGV[2])
end
return 1
