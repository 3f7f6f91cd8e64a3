-- The mark of the copy of profiles (the profiles hash's field ''): 'copying:<token>:<lease
-- end>' while one copier fills it, 'complete:<incarnation>' once filled. It goes with the
-- hash: a Redis that lost the copy lost the mark too.
-- KEYS[1] the profiles hash
-- ARGV[1] 'begin', 'keep' or 'end'; ARGV[2] the copier's token
-- ARGV[3] the new lease end ('begin', 'keep') or the Redis run_id ('end'); ARGV[4] now ('begin')
-- 'begin' takes the copy over unless another copier's lease runs past now; 'keep' extends the
-- lease and 'end' marks the copy complete, both only while the mark is still this copier's
-- (not after the hash was lost, nor after another copier took over an expired lease).
-- Returns 1 if done, 0 if not.
local mark = redis.call('HGET', KEYS[1], '') or ''
local holder, lease = string.match(mark, '^copying:([^:]*):(.*)$')
if ARGV[1] == 'begin' then
  if holder and holder ~= ARGV[2] and tonumber(lease) > tonumber(ARGV[4]) then return 0 end
elseif holder ~= ARGV[2] then
  return 0
end
if ARGV[1] == 'end' then
  redis.call('HSET', KEYS[1], '', 'complete:' .. ARGV[3])
else
  redis.call('HSET', KEYS[1], '', 'copying:' .. ARGV[2] .. ':' .. ARGV[3])
end
return 1
