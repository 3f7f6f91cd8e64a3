-- Keep a snapshot, only under the newest fencing token, and bump its stamp.
-- KEYS[1] the fencing token, KEYS[2] the board window's snapshot, KEYS[3] its stamp
-- ARGV[1] the publisher's token, ARGV[2] the snapshot, ARGV[3] its time to live in ms
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
