-- Refuse a player on one board window and remove them from it, in one atomic step.
-- KEYS[1] board sorted set, KEYS[2] the board's ban set, KEYS[3] the board's version hash,
-- KEYS[4] the board's entry metadata hash
-- ARGV[1] member
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
-- Forget the version too: after an unban the store sends the current total again, with the
-- version the board already saw, and it must land.
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
-- The ban set must outlive the board, never the other way round.
local t = redis.call('PEXPIRETIME', KEYS[1])
if t > 0 then redis.call('PEXPIREAT', KEYS[2], t) end
return 1
