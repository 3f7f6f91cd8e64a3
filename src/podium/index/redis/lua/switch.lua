-- Switch a board window (one shard's part of it) to the generation a rebuild filled beside
-- it, in one atomic step: readers see the old generation or the new one, never neither.
-- KEYS[1] the pointer to the next generation (keys.py: Keys.next_generation), KEYS[2] the
-- window's ban set, KEYS[3..5] the live sorted set, versions and metadata, KEYS[6..8] the
-- next generation's, KEYS[9..11] the names the live ones retire to until they are dropped,
-- KEYS[12] the board window's tallies of writes (write.lua), whose 'g' counts the boards
-- replaced whole: no band tells what moved, so the aggregator counts every bucket again
-- and readers count afresh (domain/changes.py), KEYS[13] the board window's list of moves
-- (write.lua), where a 'g' marks the same
-- ARGV[1] the pointer's value as this rebuild set it, ARGV[2] expire-at epoch seconds or '',
-- ARGV[3] how long the retired keys may live at most, in ms (the rebuild unlinks them after
-- its grace period; this bounds what a rebuild that died then leaves)
-- Returns 0, and changes nothing, if the pointer is not this rebuild's (it ran out, or
-- another rebuild holds the window): every write since then may have missed the new keys.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for k = 0, 2 do
  local live, nxt, old = KEYS[3 + k], KEYS[6 + k], KEYS[9 + k]
  if redis.call('EXISTS', live) == 1 then
    redis.call('RENAME', live, old)
    redis.call('PEXPIRE', old, ARGV[3])
  end
  if redis.call('EXISTS', nxt) == 1 then
    redis.call('RENAME', nxt, live)
    if ARGV[2] == '' then
      redis.call('PERSIST', live)
    else
      redis.call('EXPIREAT', live, ARGV[2])
    end
  end
end
-- Bans again: a ban that landed between the fill's look at the store and its write of that
-- page took the player off both generations, and the page put them back on the new one.
local banned = redis.call('SMEMBERS', KEYS[2])
for i = 1, #banned, 500 do
  local part = {unpack(banned, i, math.min(i + 499, #banned))}
  redis.call('ZREM', KEYS[3], unpack(part))
  redis.call('HDEL', KEYS[4], unpack(part))
  redis.call('HDEL', KEYS[5], unpack(part))
end
redis.call('HINCRBY', KEYS[12], 'n', 1)
redis.call('HINCRBY', KEYS[12], 'g', 1)
redis.call('RPUSH', KEYS[13], 'g')
for _, k in ipairs({KEYS[2], KEYS[12], KEYS[13]}) do
  if ARGV[2] ~= '' and redis.call('EXISTS', k) == 1 then
    redis.call('EXPIREAT', k, ARGV[2])
  end
end
return 1
