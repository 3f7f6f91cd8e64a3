-- Apply absolute scores to one board window, skipping banned players.
-- KEYS[1] board sorted set, KEYS[2] the board's ban set
-- ARGV[1] 'GT' (descending boards) or 'LT' (ascending), ARGV[2] expire-at epoch seconds or ''
-- ARGV[3..] member, score pairs
-- Checking the ban set here, in the same atomic step as the ZADD, is what stops a delayed
-- or replayed change from putting a banned player back on the board.
local written = 0
for i = 3, #ARGV, 2 do
  if redis.call('SISMEMBER', KEYS[2], ARGV[i]) == 0 then
    written = written + redis.call('ZADD', KEYS[1], ARGV[1], 'CH', ARGV[i + 1], ARGV[i])
  end
end
if ARGV[2] ~= '' then
  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('EXPIREAT', KEYS[1], ARGV[2]) end
  -- The ban set lives exactly as long as its board: never shorter (a replay after it
  -- expired would re-add a banned player), and not for ever when the ban came first.
  if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIREAT', KEYS[2], ARGV[2]) end
end
return written
