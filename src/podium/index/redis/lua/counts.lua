#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- How many members have ARGV[i] <= score < ARGV[i + 1], for each i, read at one instant (a
-- histogram of the board; one script instead of a MULTI of one ZCOUNT per bucket).
-- KEYS[1] board sorted set
-- ARGV[1..] the bucket bounds, ascending
local out = {}
for i = 1, #ARGV - 1 do
  out[i] = redis.call('ZCOUNT', KEYS[1], ARGV[i], '(' .. ARGV[i + 1])
end
return out
