--[[ lane_rate: set or clear one lane's rate limit.

At most `jobs` claims of the lane per window of `per_ms` (server clock);
claim.lua enforces it, taking a lane whose window is full off the ring
until it reopens (lua/include/rate.lua). Setting or clearing a limit starts
afresh: a cooling lane goes back on the ring at once (if servable).

KEYS[1] lane meta        emq:{q}:g:<lane>:meta
ARGV[1] P                emq:{q}:
ARGV[2] lane
ARGV[3] jobs             1..MAX_COUNT, or 0 with per_ms 0 to clear the limit
ARGV[4] per_ms           1..MAX_MS, or 0 with jobs 0

Reply: 1 when the lane can be served now, 0 otherwise.
Errors: EMQARG for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "wake"
--- @include "lanes"
--- @include "rate"

arg_count(4)
local P = arg_prefix(ARGV[1])
local lane = arg_lane(ARGV[2], false)
local jobs, per = arg_rate(ARGV[3], ARGV[4])
arg_key(1, lane_meta_key(P, lane))

local was = lane_servable(P, lane)
local had = redis.call('HEXISTS', KEYS[1], 'rate_jobs') == 1
redis.call('HDEL', KEYS[1], 'rate_start', 'rate_count', 'cooling')
redis.call('ZREM', P .. 'cooling', lane)
if jobs > 0 then
  redis.call('HSET', KEYS[1], 'rate_jobs', jobs, 'rate_ms', per)
  if not had then redis.call('HINCRBY', P .. 'meta', 'lane_rates', 1) end
  redis.call('SADD', P .. 'lanes', lane)
else
  redis.call('HDEL', KEYS[1], 'rate_jobs', 'rate_ms')
  if had and redis.call('HINCRBY', P .. 'meta', 'lane_rates', -1) <= 0 then
    redis.call('HDEL', P .. 'meta', 'lane_rates')
  end
end
local now = lane_settle(P, lane, was)
if now and not was then wake(P, 1) end
return now and 1 or 0
