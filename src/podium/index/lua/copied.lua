-- Mark the copy of profiles complete, if it is still the copy that began with this token:
-- not if the hash was lost meanwhile (a Redis restarted empty part way through), nor if
-- another copy began since (that one marks it when it is done).
-- KEYS[1] the profiles hash; ARGV[1] the token of begin_profiles_copy
if redis.call('HGET', KEYS[1], '') == ARGV[1] then
  redis.call('HSET', KEYS[1], '', 'complete')
  return 1
end
return 0
