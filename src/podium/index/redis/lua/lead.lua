-- Take or keep the rank aggregator's lease, and say under which fencing token.
-- KEYS[1] the lease (holds the holder's token), KEYS[2] the fencing token (a counter)
-- ARGV[1] the caller's token, ARGV[2] the lease in milliseconds
-- The counter rises each time the lease changes hands, so a token names one tenure.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local fence = redis.call('GET', KEYS[2])
  if not fence then
    fence = redis.call('INCR', KEYS[2])  -- the counter was lost (a restart): a new tenure
  end
  return tonumber(fence)
end
if holder then
  return false
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return redis.call('INCR', KEYS[2])
