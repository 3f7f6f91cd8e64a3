-- Renew a key's time to live only if it still holds our value (a rebuild's pointer to the
-- generation it fills): one that ran out and was taken by another rebuild stays theirs.
-- KEYS[1] the key, ARGV[1] our value, ARGV[2] the new time to live in ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
