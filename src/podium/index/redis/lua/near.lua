#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- Where (member, score) would stand on this shard's part of a board, and up to n rows on
-- each side, all at one instant: what a merge of shards needs to place a player and show
-- their neighbours.
-- KEYS[1] board sorted set
-- ARGV[1] member, ARGV[2] score, ARGV[3] n, ARGV[4] 'desc' or 'asc'
-- Returns {ahead, {member, score, ...} just ahead, {member, score, ...} just behind}, both
-- in board order, the member itself left out. Work: ahead_of, and one ZRANGE of 2n + 2 rows.
--#include place
local key, m, s = KEYS[1], ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
local desc = ARGV[4] == 'desc'
local ahead = ahead_of(key, m, s, desc)
if n == 0 then return {ahead, {}, {}} end
-- The probe's place among the set's own rows, m's row included if it is ahead of the probe.
local at = ahead
local held = redis.call('ZSCORE', key, m)
if held then
  local h, sv = tonumber(held), tonumber(s)
  if (desc and h > sv) or (not desc and h < sv) then at = at + 1 end
end
-- One row more on each side than asked, in case m's own row is among them and left out.
local first = math.max(0, at - n - 1)
local rows
if desc then
  rows = redis.call('ZRANGE', key, first, at + n, 'REV', 'WITHSCORES')
else
  rows = redis.call('ZRANGE', key, first, at + n, 'WITHSCORES')
end
local above, below = {}, {}
for i = 1, #rows, 2 do
  if rows[i] ~= m then
    local side = (first + (i - 1) / 2 < at) and above or below
    side[#side + 1] = rows[i]
    side[#side + 1] = rows[i + 1]
  end
end
-- keep the last n rows ahead and the first n behind
local cut = {}
for i = math.max(1, #above - 2 * n + 1), #above do cut[#cut + 1] = above[i] end
for i = #below, 2 * n + 1, -1 do below[i] = nil end
return {ahead, cut, below}
