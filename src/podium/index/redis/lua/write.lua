-- Apply absolute scores to one board window, skipping banned players.
-- KEYS[1] board sorted set, KEYS[2] the board's ban set, KEYS[3] the board's version hash,
-- KEYS[4] the board's entry metadata hash, KEYS[5] the pointer to the generation a rebuild
-- fills beside the live one (keys.py: Keys.next_generation), KEYS[6] the board window's
-- tallies of writes by band (domain/changes.py), bumped here in the same atomic step as the
-- write they count, so that a reader widening an estimate by them misses no write; KEYS[7]
-- the board window's list of moves ('<old> <new>', '' for none), one for each write its
-- tally 'n' counts, of which the aggregator reads those since its last counts
-- (domain/recount.py)
-- ARGV[1] 'GT' (descending boards), 'LT' (ascending), 'V' (versioned) or 'R' (versioned
-- removal: the member leaves, and the version stays as a tombstone); 'GTM', 'LTM', 'VM':
-- the same, each entry with its tally's version and entry metadata ('' for none) after it;
-- 'GTN', 'LTN', 'VN': see below
-- ARGV[2] expire-at epoch seconds or ''
-- ARGV[3..] member, score pairs; for 'V' and 'R', member, score, version triples; for
-- 'GTM' and 'LTM', member, score, version, metadata; for 'VM', member, score, version,
-- metadata
-- Checking the ban set here, in the same atomic step as the ZADD, is what stops a delayed
-- or replayed change from putting a banned player back on the board.
-- On GT/LT boards a version hash holds the floors recounts left (a 'V' or 'R' write there):
-- 'GTM'/'LTM' skip an entry whose version is under its member's floor, and 'GTN'/'LTN'
-- answer -1 (as below) so the caller sends the versions.
-- Boards whose totals can fall cannot use GT/LT (it would ignore a real fall): there a write
-- lands only if its version is newer than the one the board holds, so repeats and
-- reorderings are just as harmless.
-- Metadata ('GTM', 'LTM', 'VM') goes with the score: where this entry's score was written,
-- its metadata is ('<version>:<json>', or no field for none); where the member already held
-- exactly this score (a retry, or a change that moved no score), only if no newer version's
-- metadata is held, and then '<version>:' stands for none, so that an older change's cannot
-- come back. On GT/LT boards a newer version never has a worse score, and on versioned
-- boards the versions already refuse an older change, so a written score is always the
-- newest metadata. 'GTN', 'LTN', 'VN': the same with no metadata in any entry, laid out as
-- 'GT', 'LT', 'V'; on a board with a metadata hash it writes nothing and returns -1, and
-- the caller sends the batch again as 'GTM', 'LTM', 'VM' (so a board no metadata ever
-- reached pays one EXISTS, and the arguments it always had).
-- While a rebuild runs (KEYS[5] holds the names of the next generation's sorted set,
-- versions and metadata, one a line), every write is applied to that generation as well,
-- in the same step, so that nothing the updaters apply during a rebuild is missing from
-- the generation that replaces the live one (docs/architecture.md, "Rebuilds without a
-- gap"). The count returned is the live generation's.
local mode = ARGV[1]
local meta = false
local nxt = false
local pointer = redis.call('GET', KEYS[5])
if pointer then
  nxt = {}
  for name in string.gmatch(pointer, '[^\n]+') do nxt[#nxt + 1] = name end
end
if mode == 'GTN' or mode == 'LTN' or mode == 'VN' then
  if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
  if nxt and redis.call('EXISTS', nxt[3]) == 1 then return -1 end
  -- a GT/LT board holds versions only once a recount or a removal left a floor: the
  -- entries' versions are needed to check it
  if mode ~= 'VN' and redis.call('EXISTS', KEYS[3]) == 1 then return -1 end
  if mode ~= 'VN' and nxt and redis.call('EXISTS', nxt[2]) == 1 then return -1 end
  mode = string.sub(mode, 1, -2)
elseif mode == 'GTM' or mode == 'LTM' or mode == 'VM' then
  meta = true
  mode = string.sub(mode, 1, -2)
end

-- domain/changes.py, line for line: bands monotone in the score, SUB per doubling.
local SUB = 8
local function band(x)
  if x < 1 then return 0 end
  local m, e = math.frexp(x)
  return e * SUB + math.floor((2 * m - 1) * SUB)
end

-- A member went from score `old` to `new` (false: not on the board) on the live generation.
-- The list of moves keeps at least the last MOVES_KEPT (domain/recount.py): trimmed to it
-- once it holds twice as many, so the trim's cost is shared by that many writes.
local MOVES_KEPT = 2048
local function tally(old, new)
  if old == new then return end
  local C = KEYS[6]
  redis.call('HINCRBY', C, 'n', 1)
  local held = redis.call('RPUSH', KEYS[7],
    (old and string.format('%d', old) or '') .. ' ' .. (new and string.format('%d', new) or ''))
  if held > 2 * MOVES_KEPT then redis.call('LTRIM', KEYS[7], -MOVES_KEPT, -1) end
  if not old then
    redis.call('HINCRBY', C, 'e' .. math.floor(band(new) / SUB), 1)
  elseif not new then
    redis.call('HINCRBY', C, 'x' .. math.floor(band(old) / SUB), 1)
  else
    local sign, lo, hi = '+', old, new
    if new < old then sign, lo, hi = '-', new, old end
    for b = band(lo), band(hi) do redis.call('HINCRBY', C, sign .. b, 1) end
  end
end

-- One generation's sorted set Z, versions VER and metadata META, the ban set shared;
-- `live`: this is the generation readers read, whose writes are tallied.
local function apply(Z, VER, META, live)
  local hasmeta = meta and redis.call('EXISTS', META) == 1

  -- the member's score was just written with this entry's: its metadata is the newest
  local function set_meta(m, v, j)
    if j ~= '' then
      redis.call('HSET', META, m, v .. ':' .. j)
      hasmeta = true
    elseif hasmeta then
      redis.call('HDEL', META, m)
    end
  end

  -- the member already held this entry's score: keep its metadata unless a newer one's is held
  local function keep_meta(m, v, j)
    local held = hasmeta and redis.call('HGET', META, m)
    if held then
      if tonumber(string.match(held, '^(%d+):')) >= tonumber(v) then return end
    elseif j == '' then
      return
    end
    redis.call('HSET', META, m, v .. ':' .. j)
    hasmeta = true
  end

  local written = 0
  if mode == 'V' or mode == 'R' then
    local step = meta and 4 or 3
    for i = 3, #ARGV, step do
      local m = ARGV[i]
      if redis.call('SISMEMBER', KEYS[2], m) == 0 then
        local held = tonumber(redis.call('HGET', VER, m) or '0')
        if tonumber(ARGV[i + 2]) > held then
          local was = live and tonumber(redis.call('ZSCORE', Z, m) or nil)
          if mode == 'V' then
            if live then tally(was, tonumber(ARGV[i + 1])) end
            redis.call('ZADD', Z, ARGV[i + 1], m)
            if meta then set_meta(m, ARGV[i + 2], ARGV[i + 3]) end
          else
            if live and was then tally(was, false) end
            redis.call('ZREM', Z, m)
            redis.call('HDEL', META, m)
          end
          redis.call('HSET', VER, m, ARGV[i + 2])
          written = written + 1
        end
      end
    end
  else
    local step = meta and 4 or 2
    -- A recount (a flagged result rejected) was written by version ('V', which may lower a
    -- total) and left its version here: an older change of the member (a redelivery) must
    -- not raise the total back, so with versions ('GTM', 'LTM') one under the floor is
    -- skipped. A board no recount reached holds no version hash: nothing to look up.
    local floors = meta and redis.call('EXISTS', VER) == 1
    for i = 3, #ARGV, step do
      local m = ARGV[i]
      local under = floors and tonumber(ARGV[i + 2]) < tonumber(redis.call('HGET', VER, m) or '0')
      if not under and redis.call('SISMEMBER', KEYS[2], m) == 0 then
        local was = live and tonumber(redis.call('ZSCORE', Z, m) or nil)
        local changed = redis.call('ZADD', Z, mode, 'CH', ARGV[i + 1], m)
        written = written + changed
        if live and changed == 1 then tally(was, tonumber(ARGV[i + 1])) end
        if meta then
          if changed == 1 then
            set_meta(m, ARGV[i + 2], ARGV[i + 3])
          elseif (hasmeta or ARGV[i + 3] ~= '')
              and tonumber(redis.call('ZSCORE', Z, m)) == tonumber(ARGV[i + 1]) then
            keep_meta(m, ARGV[i + 2], ARGV[i + 3])
          end
        end
      end
    end
  end
  return written
end

local written = apply(KEYS[1], KEYS[3], KEYS[4], true)
-- The next generation's keys take their expiry at the switch (switch.lua); until then they
-- hold the staging time to live (an hour, as the rebuild's fill sets it), so a rebuild that
-- died leaves nothing behind for long, even a key this write made first.
if nxt then
  apply(nxt[1], nxt[2], nxt[3], false)
  for k = 1, 3 do
    if redis.call('PTTL', nxt[k]) == -1 then redis.call('PEXPIRE', nxt[k], 3600000) end
  end
end
if ARGV[2] ~= '' then
  -- The ban set, the versions and the metadata live exactly as long as their board: never
  -- shorter (a replay after they expired would re-add a banned player or an old total), and
  -- not for ever when the ban came first.
  for k = 1, 7 do
    if k ~= 5 and redis.call('EXISTS', KEYS[k]) == 1 then
      redis.call('EXPIREAT', KEYS[k], ARGV[2])
    end
  end
end
return written
