--[[ lane: pause, resume or limit one lane, keeping the ring in step.

KEYS[1] lane meta        emq:{q}:g:<lane>:meta
ARGV[1] P                emq:{q}:
ARGV[2] lane
ARGV[3] op               'pause' | 'resume' | 'limit'
ARGV[4] value            for 'limit': max active jobs, or 0 for no limit (0 otherwise);
                         a limit counts the lane's active jobs afresh (one pass
                         over the queue's active set, see lanes.lua)

Reply: 1 when the lane can be served now, 0 otherwise. A wake token is
pushed when the lane comes back on the ring, and when a paused lane is
resumed while it holds ready jobs and cools (its rate window is full): a
parked consumer then claims and learns when the lane reopens (claim's
lane_wait_ms, which does not count a paused lane).
Errors: EMQARG for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "wake"
--- @include "lanes"

arg_count(4)
local P = arg_prefix(ARGV[1])
local lane = arg_lane(ARGV[2], false)
local op = ARGV[3]
if op ~= 'pause' and op ~= 'resume' and op ~= 'limit' then
  arg_fail('op', 'want pause, resume or limit, got "' .. string.sub(op, 1, 40) .. '"')
end
local v = arg_int(ARGV[4], 'limit', 0, MAX_COUNT)
arg_key(1, lane_meta_key(P, lane))

local was = lane_servable(P, lane)
local was_paused = op == 'resume' and redis.call('HGET', KEYS[1], 'paused') == '1'
if op == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1')
elseif op == 'resume' then
  redis.call('HDEL', KEYS[1], 'paused')
else
  lane_set_limit(P, lane, v)
end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('SADD', P .. 'lanes', lane) end
local now = lane_settle(P, lane, was)
if now and not was then
  wake(P, 1)
elseif op == 'resume' and was_paused and not now and redis.call('HGET', KEYS[1], 'cooling') == '1'
    and redis.call('ZCARD', lane_pending_key(P, lane)) > 0 then
  wake(P, 1)
end
return now and 1 or 0
