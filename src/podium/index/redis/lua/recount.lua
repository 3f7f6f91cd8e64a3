#!lua flags=no-writes
-- (no-writes: this script only reads, and Redis holds it to that.)
-- What the aggregator counts a shard's histogram with, in one atomic step (domain/recount.py):
-- the tally of writes 'n' and the generation 'g', the moves since an earlier 'n', and the
-- counts of runs of buckets.
-- KEYS[1] board sorted set, KEYS[2] the board window's tallies (write.lua), KEYS[3] its list
-- of moves (write.lua: one for each write 'n' counts)
-- ARGV[1] the earlier 'n', or '' for no moves; ARGV[2] the 'g' read with it, or '' for none
-- to compare; ARGV[3..] runs of ascending bucket bounds, an empty argument between two
-- runs: 1, 5, 9, '', 20, 30 counts [1, 5), [5, 9), [20, 30)
-- Returns n, g, then 1 and the count of moves and the moves, or 0 where they are not all
-- held (more than the list keeps, 'n' went back, or another generation: a 'g' among them, or
-- 'g' is not the earlier one), then the counts. The 'g' is compared, not only looked for among
-- the moves: a node that took over after a failover may hold a lower 'n' than the one the
-- aggregator counted at, so the mark the mender pushed there may lie before that 'n', where
-- the moves since it never reach (workers/mender.py).
local tally = redis.call('HMGET', KEYS[2], 'n', 'g')
local n = tonumber(tally[1] or '0')
local g = tonumber(tally[2] or '0')
local out = {n, g}
local moves = false
if ARGV[1] ~= '' and (ARGV[2] == '' or tonumber(ARGV[2]) == g) then
  local k = n - tonumber(ARGV[1])
  if k == 0 then
    moves = {}
  elseif k > 0 and k <= redis.call('LLEN', KEYS[3]) then
    moves = redis.call('LRANGE', KEYS[3], -k, -1)
    for _, m in ipairs(moves) do
      if m == 'g' then moves = false break end
    end
  end
end
if moves then
  out[#out + 1] = 1
  out[#out + 1] = #moves
  for _, m in ipairs(moves) do out[#out + 1] = m end
else
  out[#out + 1] = 0
end
for i = 3, #ARGV - 1 do
  if ARGV[i] ~= '' and ARGV[i + 1] ~= '' then
    out[#out + 1] = redis.call('ZCOUNT', KEYS[1], ARGV[i], '(' .. ARGV[i + 1])
  end
end
return out
