-- Refresh the time a generation marker was confirmed on its node, only if the marker still
-- holds what the mender read (index/generations.py): a marker gone (the data lost), or
-- written again meanwhile (a rebuild, a failover mended), keeps its own time.
-- KEYS[1] the marker, KEYS[2] its confirmed time; ARGV[1] the marker as read, ARGV[2] the time
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
return 0
