--[[ lane: pause, resume or limit one lane, keeping the ring in step.

KEYS[1] lane meta        emq:{q}:g:<lane>:meta
ARGV[1] P                emq:{q}:
ARGV[2] lane
ARGV[3] op               'pause' | 'resume' | 'limit'
ARGV[4] value            for 'limit': max active jobs, or 0 for no limit

Reply: 1 when the lane can be served now, 0 otherwise.
]]
--- @include "wake"
--- @include "lanes"

local P, lane, op = ARGV[1], ARGV[2], ARGV[3]
local was = lane_servable(P, lane)
if op == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1')
elseif op == 'resume' then
  redis.call('HDEL', KEYS[1], 'paused')
elseif op == 'limit' then
  local v = tonumber(ARGV[4])
  if not v or v < 0 then return redis.error_reply('EMQARG limit must be >= 0') end
  if v == 0 then redis.call('HDEL', KEYS[1], 'limit') else redis.call('HSET', KEYS[1], 'limit', v) end
else
  return redis.error_reply('EMQARG unknown lane op ' .. op)
end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('SADD', P .. 'lanes', lane) end
local now = lane_settle(P, lane, was)
if now and not was then wake(P, 1) end
return now and 1 or 0
