-- One client's token bucket for reads, shared by every API process: refill by the time
-- since the last take, at ARGV[1] tokens a second up to ARGV[2], then take one if there is
-- one. The time is the server's own (TIME), so API processes' clocks need not agree.
-- KEYS[1]: the bucket (a hash: tokens, at). Returns {1, 0} when taken, else
-- {0, milliseconds until a token is back}.
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1]) or burst
local at = tonumber(held[2]) or now
if now > at then
  tokens = math.min(burst, tokens + (now - at) * rate)
end
local taken = 0
if tokens >= 1 then
  tokens = tokens - 1
  taken = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
-- A bucket left alone refills completely within burst / rate seconds: forget it then.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
if taken == 1 then
  return {1, 0}
end
return {0, math.ceil((1 - tokens) / rate * 1000)}
