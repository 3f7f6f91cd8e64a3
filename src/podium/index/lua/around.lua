#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- A player's rank and the rows around it, read in one atomic step: one round trip, and the
-- board cannot move between the rank and the rows, so the player is always among them.
-- KEYS[1] board sorted set
-- ARGV[1] member, ARGV[2] neighbours on each side, ARGV[3] 'desc' or 'asc'
-- Returns false when the member is not on the board, else {rank, {member, score, ...}} with
-- the rows from rank - neighbours (at least 0) to rank + neighbours; the member's own score
-- is its row, so it is not read twice.
local desc = ARGV[3] == 'desc'
local rank = redis.call(desc and 'ZREVRANK' or 'ZRANK', KEYS[1], ARGV[1])
if not rank then return false end
local n = tonumber(ARGV[2])
local first = math.max(0, rank - n)
if desc then
  return {rank, redis.call('ZRANGE', KEYS[1], first, rank + n, 'REV', 'WITHSCORES')}
end
return {rank, redis.call('ZRANGE', KEYS[1], first, rank + n, 'WITHSCORES')}
