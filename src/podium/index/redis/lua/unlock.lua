-- Give a lock back only if it is still ours: a lock that ran out and was taken by another
-- process stays theirs.
-- KEYS[1] the lock, ARGV[1] our token
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
