-- Keep the index's copy of profiles: one hash, a field per player holding the JSON array
-- [version, name, avatar, country]. A copy lands only if its version is newer than the one
-- held, so outbox rows applied twice, late or out of order never bring back an old name.
-- KEYS[1] the profiles hash
-- ARGV member, version, JSON triples
-- Returns how many were kept.
local kept = 0
for i = 1, #ARGV, 3 do
  local held = redis.call('HGET', KEYS[1], ARGV[i])
  local version = held and tonumber(string.match(held, '^%[(%d+),')) or -1
  if tonumber(ARGV[i + 1]) > version then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
    kept = kept + 1
  end
end
return kept
