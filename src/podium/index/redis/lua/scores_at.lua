#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- The score at each 0-based rank of a board in board order, at one instant (what the
-- aggregator samples to place a histogram's boundaries).
-- KEYS[1] board sorted set
-- ARGV[1] 'desc' or 'asc', ARGV[2..] ranks (never negative: the adapter checks)
-- Returns one score per rank, false past the end. Work: O(log N) per rank.
local desc = ARGV[1] == 'desc'
local out = {}
for i = 2, #ARGV do
  local r = tonumber(ARGV[i])
  local row
  if desc then
    row = redis.call('ZRANGE', KEYS[1], r, r, 'REV', 'WITHSCORES')
  else
    row = redis.call('ZRANGE', KEYS[1], r, r, 'WITHSCORES')
  end
  out[#out + 1] = row[2] or false
end
return out
