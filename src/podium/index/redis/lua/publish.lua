-- Keep a snapshot, only under the newest fencing token and the lease it was taken with, and
-- give it a new stamp.
-- KEYS[1] the fencing token, KEYS[2] the board window's snapshot, KEYS[3] its stamp,
-- KEYS[4] the lease (holds the holder's token)
-- ARGV[1] the publisher's fencing token, ARGV[2] the snapshot, ARGV[3] its time to live in ms,
-- ARGV[4] the publisher's lease token, ARGV[5] the stamp (the publisher makes it unique)
-- Both checks, because a replica promoted while behind may have lost the counter's last rise:
-- a new tenure there can be handed the very number an old one holds, and only the lease's
-- holder tells the two apart. A lease that ran out refuses too: a publisher that paused past
-- it may have been replaced, and its next lead says which.
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('GET', KEYS[4]) ~= ARGV[4] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[3])
return 1
