-- Refuse a player on one board window and remove them from it, in one atomic step.
-- KEYS[1] board sorted set, KEYS[2] the board's ban set, KEYS[3] the board's version hash,
-- KEYS[4] the board's entry metadata hash, KEYS[5] the pointer to the generation a rebuild
-- fills (write.lua): the ban holds there too; KEYS[6] the board window's tallies of writes
-- (write.lua): a banned member leaving is one; KEYS[7] the board window's list of moves
-- (write.lua), where it is one too
-- ARGV[1] member; ARGV[2] 'forget' (an erased player): the same removal, and the member out
-- of the ban set rather than into it, so that no key keeps their id (the store refuses them
-- by the hash of it)
local forget = ARGV[2] == 'forget'
local MOVES_KEPT = 2048 -- domain/recount.py; trimmed as write.lua trims
if forget then
  redis.call('SREM', KEYS[2], ARGV[1])
else
  redis.call('SADD', KEYS[2], ARGV[1])
end
local was = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or nil)
if was then
  -- domain/changes.py's octave of the score, as write.lua's band
  local octave = 0
  if was >= 1 then
    local m, e = math.frexp(was)
    octave = math.floor((e * 8 + math.floor((2 * m - 1) * 8)) / 8)
  end
  redis.call('HINCRBY', KEYS[6], 'n', 1)
  redis.call('HINCRBY', KEYS[6], 'x' .. octave, 1)
  -- Trimmed here too: a run of bans on a board nobody writes would grow it without end.
  local moves = redis.call('RPUSH', KEYS[7], string.format('%d', was) .. ' ')
  if moves > 2 * MOVES_KEPT then redis.call('LTRIM', KEYS[7], -MOVES_KEPT, -1) end
  -- they live as long as the board, as write.lua keeps them
  local t = redis.call('PEXPIRETIME', KEYS[1])
  if t > 0 then
    redis.call('PEXPIREAT', KEYS[6], t)
    redis.call('PEXPIREAT', KEYS[7], t)
  end
end
local held = {KEYS[1], KEYS[3], KEYS[4]}
local pointer = redis.call('GET', KEYS[5])
if pointer then
  for name in string.gmatch(pointer, '[^\n]+') do held[#held + 1] = name end
end
for g = 1, #held, 3 do
  redis.call('ZREM', held[g], ARGV[1])
  -- Forget the version too: after an unban the store sends the current total again, with
  -- the version the board already saw, and it must land.
  redis.call('HDEL', held[g + 1], ARGV[1])
  redis.call('HDEL', held[g + 2], ARGV[1])
end
-- The ban set must outlive the board, never the other way round.
if not forget then
  local t = redis.call('PEXPIRETIME', KEYS[1])
  if t > 0 then redis.call('PEXPIREAT', KEYS[2], t) end
end
return 1
