#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- Ranks and scores of several members, read at one instant (one script instead of a MULTI
-- of one command per member: far less work for the client).
-- KEYS[1] board sorted set
-- ARGV[1] 'desc' or 'asc', ARGV[2..] members
-- Returns rank, score for each member in turn; false, false for one not on the board.
local cmd = ARGV[1] == 'desc' and 'ZREVRANK' or 'ZRANK'
local out = {}
for i = 2, #ARGV do
  local rank = redis.call(cmd, KEYS[1], ARGV[i])
  out[#out + 1] = rank
  out[#out + 1] = rank and redis.call('ZSCORE', KEYS[1], ARGV[i])
end
return out
