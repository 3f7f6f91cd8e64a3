-- Board marks (domain/marks.py): each field, "<database>/<partition>", keeps the later of
-- the time it holds and the one given, in one step, so that two updaters noting at once
-- (or a mark applied late, a redelivery) never take a watermark back.
-- KEYS[1]: the hash; ARGV: field, time, field, time, ...
for i = 1, #ARGV, 2 do
  local held = redis.call('HGET', KEYS[1], ARGV[i])
  if not held or tonumber(held) < tonumber(ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 0
