-- Where a (member, score) stands on one shard's part of a board (included by ahead.lua and
-- near.lua). Board order (invariant 4 of docs/architecture.md): on 'desc', higher score first
-- and, on equal scores, the member whose bytes sort later first (as ZREVRANGE returns them);
-- on 'asc', the reverse of both.

-- Whether member a sorts before member b by bytes, as Redis orders equal scores. Not Lua's
-- a < b: that compares with strcoll, under the locale Redis was started in.
local function bytes_before(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- A run of equal scores up to this long is read whole (one command); a longer one, as on a
-- board with shared ranks, is searched by halves (one ZRANGE of one row per step) down to
-- this long, and the rest read whole.
local SCAN = 16

-- How many of the set's members are strictly ahead of (m, s) in board order, m itself left
-- out: m is the one being placed, so a row of m with another score (it moved since s was
-- read) is never counted ahead of itself. Work: O(log N) when m holds s here (its own rank);
-- else O(log N) for the scores around plus, for a run of k members with score s, about
-- log2(k / SCAN) single-row reads of O(log N) each and one read of up to SCAN rows.
local function ahead_of(key, m, s, desc)
  local held = redis.call('ZSCORE', key, m)
  local sv = tonumber(s)
  if held and tonumber(held) == sv then
    return redis.call(desc and 'ZREVRANK' or 'ZRANK', key, m)
  end
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s) -- ascending rank of the run's first
  local run = redis.call('ZCOUNT', key, s, s)
  local k = 0 -- members of the run whose bytes sort before m (m is not among them)
  if run > 0 then
    -- halve the run down to at most SCAN members, then read those whole
    local a, b = 0, run
    while b - a > SCAN do
      local mid = math.floor((a + b) / 2)
      local x = redis.call('ZRANGE', key, lo + mid, lo + mid)[1]
      if bytes_before(x, m) then a = mid + 1 else b = mid end
    end
    local members = redis.call('ZRANGE', key, lo + a, lo + b - 1)
    k = a
    for i = 1, #members do
      if not bytes_before(members[i], m) then break end
      k = k + 1
    end
  end
  -- ahead on 'desc': the higher scores, and the run's members after m; on 'asc': the lower
  -- scores, and the run's members before m
  local n
  if desc then
    n = redis.call('ZCARD', key) - lo - k
  else
    n = lo + k
  end
  if held then
    local h = tonumber(held)
    if (desc and h > sv) or (not desc and h < sv) then n = n - 1 end
  end
  return n
end
