--[[ rate: set or clear the queue's rate limit.

At most `jobs` claims of the queue per window of `per_ms` (server clock);
claim.lua enforces it (see lua/include/rate.lua). Setting a limit starts a
fresh window. A lane's limit is lane_rate.lua.

KEYS[1] meta             emq:{q}:meta
ARGV[1] P                emq:{q}:
ARGV[2] jobs             1..MAX_COUNT, or 0 with per_ms 0 to clear the limit
ARGV[3] per_ms           1..MAX_MS, or 0 with jobs 0

Reply: 1. Pushes WAKE_MAX wake tokens so parked consumers look again under
the new limit.
Errors: EMQARG for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "wake"
--- @include "rate"

arg_count(3)
local P = arg_prefix(ARGV[1])
local jobs, per = arg_rate(ARGV[2], ARGV[3])
arg_key(1, P .. 'meta')

redis.call('HDEL', KEYS[1], 'rate_start', 'rate_count')
if jobs > 0 then
  redis.call('HSET', KEYS[1], 'rate_jobs', jobs, 'rate_ms', per)
else
  redis.call('HDEL', KEYS[1], 'rate_jobs', 'rate_ms')
end
wake(P, WAKE_MAX)
return 1
