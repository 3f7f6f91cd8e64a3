#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- Up to n rows on one side of a place (member, score) in board order, with how many
-- members stand strictly ahead of the place and whether one holds it exactly, all at one
-- instant: a page cursor's read (RankIndex.page_from).
-- KEYS[1] board sorted set
-- ARGV[1] member, ARGV[2] score, ARGV[3] n, ARGV[4] 'desc' or 'asc', ARGV[5] 'after' or
-- 'before'
-- Returns {ahead, on (1 or 0), {member, score, ...}} in board order: the rows strictly behind
-- the place ('after') or strictly ahead of it ('before'), the nearest n. By rank, not by
-- ZRANGE BYSCORE with an exclusive bound: a bound on the score alone cannot tell apart the
-- members of one score, which the member's bytes order (invariant 4). Work: ahead_of, and
-- one ZRANGE of n rows.
--#include place
local key, m, s = KEYS[1], ARGV[1], ARGV[2]
local n = tonumber(ARGV[3])
local desc = ARGV[4] == 'desc'
-- ahead_of leaves m's own row out: count it where it stands ahead of the place (it moved),
-- and say whether it holds the place itself.
local ahead = ahead_of(key, m, s, desc)
local on = 0
local held = redis.call('ZSCORE', key, m)
if held then
  local h, sv = tonumber(held), tonumber(s)
  if h == sv then
    on = 1
  elseif (desc and h > sv) or (not desc and h < sv) then
    ahead = ahead + 1
  end
end
local first, last
if ARGV[5] == 'before' then
  first, last = math.max(0, ahead - n), ahead - 1
else
  first, last = ahead + on, ahead + on + n - 1
end
if n == 0 or last < first then return {ahead, on, {}} end
local rows
if desc then
  rows = redis.call('ZRANGE', key, first, last, 'REV', 'WITHSCORES')
else
  rows = redis.call('ZRANGE', key, first, last, 'WITHSCORES')
end
return {ahead, on, rows}
