#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- For each (member, score): how many of this shard's members are strictly ahead of it in
-- board order (the member need not be here; if it is, it is left out), all at one instant.
-- KEYS[1] board sorted set
-- ARGV[1] 'desc' or 'asc', ARGV[2..] member, score pairs
-- Returns one count per pair. Work per pair: place.lua's ahead_of.
--#include place
local desc = ARGV[1] == 'desc'
local out = {}
for i = 2, #ARGV, 2 do
  out[#out + 1] = ahead_of(KEYS[1], ARGV[i], ARGV[i + 1], desc)
end
return out
