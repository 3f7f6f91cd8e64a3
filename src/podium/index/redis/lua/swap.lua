-- Put a fully built staging set (and its versions) in place of a board, in one atomic step.
-- KEYS[1] staging sorted set, KEYS[2] board sorted set, KEYS[3] the board's ban set,
-- KEYS[4] staging version hash, KEYS[5] the board's version hash, KEYS[6] staging metadata
-- hash, KEYS[7] the board's metadata hash
-- ARGV[1] expire-at epoch seconds or ''
-- Bans are applied again here, not only while staging: a ban that landed while the staging
-- set was being filled removed the player from the old board, and must hold on the new one.
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  local banned = redis.call('SMEMBERS', KEYS[3])
  for i = 1, #banned, 500 do
    redis.call('ZREM', KEYS[2], unpack(banned, i, math.min(i + 499, #banned)))
  end
else
  redis.call('DEL', KEYS[2])
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('RENAME', KEYS[4], KEYS[5])
else
  redis.call('DEL', KEYS[5])
end
if redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('RENAME', KEYS[6], KEYS[7])
  local banned = redis.call('SMEMBERS', KEYS[3])
  for i = 1, #banned, 500 do
    redis.call('HDEL', KEYS[7], unpack(banned, i, math.min(i + 499, #banned)))
  end
else
  redis.call('DEL', KEYS[7])
end
-- The board and its sidecars expire together (see write.lua); RENAME dropped the old TTL.
for k = 2, 7 do
  if k ~= 4 and k ~= 6 then
    if ARGV[1] == '' then
      redis.call('PERSIST', KEYS[k])
    else
      redis.call('EXPIREAT', KEYS[k], ARGV[1])
    end
  end
end
return 1
