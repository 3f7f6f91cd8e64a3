-- Take members out of a sorted set an erasure's walk found them in (index/redis/erasure.py),
-- each removal in the same atomic step as the move it is. Where the set is a live board
-- window's (its tallies exist), each member taken off bumps 'n' and 'x<octave>' and appends
-- '<old> ' to the list of moves, as write.lua's removal does: the aggregator's counts follow
-- the moves (domain/recount.py) and readers widen by the tallies (domain/changes.py), so a
-- removal that recorded none would stay counted until the rotating count reached its bucket.
-- A generation being built or retired, or a staging set, has no tallies of its own (the
-- names KEYS[2] and KEYS[3] give for it never exist): its members just go.
-- KEYS[1] a sorted set, KEYS[2] its board window's tallies (write.lua), KEYS[3] its list of
-- moves (write.lua): the same hash tag, one slot
-- ARGV the members
-- Returns how many were on the set.
local MOVES_KEPT = 2048 -- domain/recount.py; trimmed as write.lua trims
local tallied = redis.call('EXISTS', KEYS[2]) == 1
-- They live as long as the board (write.lua, ban.lua): its expiry, read before the last
-- member's removal may delete it.
local t = redis.call('PEXPIRETIME', KEYS[1])
local gone = 0
for i = 1, #ARGV do
  local was = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]) or nil)
  if was then
    redis.call('ZREM', KEYS[1], ARGV[i])
    gone = gone + 1
    if tallied then
      -- domain/changes.py's octave of the score, as write.lua's band
      local octave = 0
      if was >= 1 then
        local m, e = math.frexp(was)
        octave = math.floor((e * 8 + math.floor((2 * m - 1) * 8)) / 8)
      end
      redis.call('HINCRBY', KEYS[2], 'n', 1)
      redis.call('HINCRBY', KEYS[2], 'x' .. octave, 1)
      local held = redis.call('RPUSH', KEYS[3], string.format('%d', was) .. ' ')
      if held > 2 * MOVES_KEPT then redis.call('LTRIM', KEYS[3], -MOVES_KEPT, -1) end
    end
  end
end
if tallied and gone > 0 and t > 0 then
  redis.call('PEXPIREAT', KEYS[2], t)
  redis.call('PEXPIREAT', KEYS[3], t)
end
return gone
