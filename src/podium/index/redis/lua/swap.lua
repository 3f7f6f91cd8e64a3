-- Put a fully built staging set (and its versions) in place of a board, in one atomic step.
-- KEYS[1] staging sorted set, KEYS[2] board sorted set, KEYS[3] the board's ban set,
-- KEYS[4] staging version hash, KEYS[5] the board's version hash, KEYS[6] staging metadata
-- hash, KEYS[7] the board's metadata hash, KEYS[8] the board window's tallies of writes
-- (write.lua), whose 'g' counts the boards replaced whole: no band tells what moved, so the
-- aggregator counts every bucket again and readers count afresh (domain/changes.py),
-- KEYS[9] the board window's list of moves (write.lua), where a 'g' marks the same
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
redis.call('HINCRBY', KEYS[8], 'n', 1)
redis.call('HINCRBY', KEYS[8], 'g', 1)
redis.call('RPUSH', KEYS[9], 'g')
-- The board and its sidecars expire together (see write.lua); RENAME dropped the old TTL.
for k = 2, 9 do
  if k ~= 4 and k ~= 6 then
    if ARGV[1] == '' then
      redis.call('PERSIST', KEYS[k])
    else
      redis.call('EXPIREAT', KEYS[k], ARGV[1])
    end
  end
end
return 1
