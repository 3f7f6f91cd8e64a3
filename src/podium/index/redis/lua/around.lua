#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- A player's rank and the rows around it, read in one atomic step: one round trip, and the
-- board cannot move between the rank and the rows, so the player is always among them.
-- KEYS[1] board sorted set, KEYS[2] the profiles hash (profiles.lua), KEYS[3] the board's
-- entry metadata hash (write.lua), KEYS[4] the index's generation marker (generations.py)
-- ARGV[1] member, ARGV[2] neighbours on each side, ARGV[3] 'desc' or 'asc'
-- Returns false when the member is not on the board, else {rank, {member, score, ...}} with
-- the rows from rank - neighbours (at least 0) to rank + neighbours (the member's own score
-- is its row, so it is not read twice), and a third element when the copy of profiles is
-- complete (its field '' says so): each row's profile (false where there is none), so the
-- names come in the same round trip; and a fourth when the board has entry metadata: each
-- row's, as write.lua holds it (false where there is none); a fifth, the generation marker
-- as it is at this same instant (false where it is gone), so that a reader knows the rows
-- came from a board that held its data without asking again (mending.py). Elements that do
-- not apply are false.
local desc = ARGV[3] == 'desc'
local rank = redis.call(desc and 'ZREVRANK' or 'ZRANK', KEYS[1], ARGV[1])
if not rank then return false end
local n = tonumber(ARGV[2])
local first = math.max(0, rank - n)
local rows
if desc then
  rows = redis.call('ZRANGE', KEYS[1], first, rank + n, 'REV', 'WITHSCORES')
else
  rows = redis.call('ZRANGE', KEYS[1], first, rank + n, 'WITHSCORES')
end
local members = {}
for i = 1, #rows, 2 do members[#members + 1] = rows[i] end
local mark = redis.call('HGET', KEYS[2], '')
local names = false
if mark and string.sub(mark, 1, 9) == 'complete:' then
  names = redis.call('HMGET', KEYS[2], unpack(members))
end
local meta = false
if redis.call('EXISTS', KEYS[3]) == 1 then
  meta = redis.call('HMGET', KEYS[3], unpack(members))
end
return {rank, rows, names, meta, redis.call('GET', KEYS[4])}
