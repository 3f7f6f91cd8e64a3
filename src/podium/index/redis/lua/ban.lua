-- Refuse a player on one board window and remove them from it, in one atomic step.
-- KEYS[1] board sorted set, KEYS[2] the board's ban set, KEYS[3] the board's version hash,
-- KEYS[4] the board's entry metadata hash, KEYS[5] the pointer to the generation a rebuild
-- fills (write.lua): the ban holds there too
-- ARGV[1] member
redis.call('SADD', KEYS[2], ARGV[1])
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
local t = redis.call('PEXPIRETIME', KEYS[1])
if t > 0 then redis.call('PEXPIREAT', KEYS[2], t) end
return 1
