--[[ rate: set or clear a rate limit, of the whole queue or of one lane.

At most `jobs` claims per window of `per_ms` (server clock); claim.lua
enforces it (see lua/include/rate.lua). Setting a limit starts a fresh
window; a cooling lane goes back on the ring at once.

KEYS[1] meta             emq:{q}:meta, or emq:{q}:g:<lane>:meta for a lane
ARGV[1] P                emq:{q}:
ARGV[2] lane             '' for the queue, else the lane
ARGV[3] jobs             1..MAX_COUNT, or 0 with per_ms 0 to clear the limit
ARGV[4] per_ms           1..MAX_MS, or 0 with jobs 0

Reply: 1 (for a lane: 1 when it can be served now, 0 otherwise).
Errors: EMQARG for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "wake"
--- @include "lanes"

arg_count(4)
local P = arg_prefix(ARGV[1])
local lane = arg_lane(ARGV[2], true)
local jobs = arg_int(ARGV[3], 'jobs', 0, MAX_COUNT)
local per = arg_int(ARGV[4], 'per_ms', 0, MAX_MS)
if (jobs == 0) ~= (per == 0) then arg_fail('jobs', 'jobs and per_ms are both 0 (clear) or both positive') end
arg_key(1, lane == '' and P .. 'meta' or lane_meta_key(P, lane))

if lane == '' then
  redis.call('HDEL', KEYS[1], 'rate_start', 'rate_count')
  if jobs > 0 then
    redis.call('HSET', KEYS[1], 'rate_jobs', jobs, 'rate_ms', per)
  else
    redis.call('HDEL', KEYS[1], 'rate_jobs', 'rate_ms')
  end
  wake(P, WAKE_MAX)  -- parked consumers look again under the new limit
  return 1
end

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
