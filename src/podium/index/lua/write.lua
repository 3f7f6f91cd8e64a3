-- Apply absolute scores to one board window, skipping banned players.
-- KEYS[1] board sorted set, KEYS[2] the board's ban set, KEYS[3] the board's version hash
-- ARGV[1] 'GT' (descending boards), 'LT' (ascending), 'V' (versioned) or 'R' (versioned
-- removal: the member leaves, and the version stays as a tombstone)
-- ARGV[2] expire-at epoch seconds or ''
-- ARGV[3..] member, score pairs; for 'V', member, score, version triples
-- Checking the ban set here, in the same atomic step as the ZADD, is what stops a delayed
-- or replayed change from putting a banned player back on the board.
-- Boards whose totals can fall cannot use GT/LT (it would ignore a real fall): there a write
-- lands only if its version is newer than the one the board holds, so repeats and
-- reorderings are just as harmless.
local written = 0
if ARGV[1] == 'V' or ARGV[1] == 'R' then
  for i = 3, #ARGV, 3 do
    local m = ARGV[i]
    if redis.call('SISMEMBER', KEYS[2], m) == 0 then
      local held = tonumber(redis.call('HGET', KEYS[3], m) or '0')
      if tonumber(ARGV[i + 2]) > held then
        if ARGV[1] == 'V' then
          redis.call('ZADD', KEYS[1], ARGV[i + 1], m)
        else
          redis.call('ZREM', KEYS[1], m)
        end
        redis.call('HSET', KEYS[3], m, ARGV[i + 2])
        written = written + 1
      end
    end
  end
else
  for i = 3, #ARGV, 2 do
    if redis.call('SISMEMBER', KEYS[2], ARGV[i]) == 0 then
      written = written + redis.call('ZADD', KEYS[1], ARGV[1], 'CH', ARGV[i + 1], ARGV[i])
    end
  end
end
if ARGV[2] ~= '' then
  -- The ban set and the versions live exactly as long as their board: never shorter (a
  -- replay after they expired would re-add a banned player or an old total), and not for
  -- ever when the ban came first.
  for k = 1, 3 do
    if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('EXPIREAT', KEYS[k], ARGV[2]) end
  end
end
return written
