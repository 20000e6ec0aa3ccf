--[[ enqueue: admit one job, flat or onto a lane, now or later.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] flat pending     emq:{q}:pending
KEYS[3] schedule         emq:{q}:schedule
ARGV[1] P                emq:{q}:   (lane keys, ring, wake, lanes derive from it)
ARGV[2] id               branded JOB id, the idempotency key
ARGV[3] payload          bytes
ARGV[4] lane             a branded id, or '' for the flat pending set
ARGV[5] delay_ms         0 for ready now

Replies: 1 enqueued, 2 scheduled, 0 duplicate (the row exists; nothing changed).
Errors:  EMQKIND when the id is not JOB-branded (nothing written).
]]
--- @include "now"
--- @include "wake"
--- @include "lanes"

local P, id, lane = ARGV[1], ARGV[2], ARGV[4]
local delay = tonumber(ARGV[5])
if string.sub(id, 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-branded: ' .. id)
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end

local now = now_ms()
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '0', 'payload', ARGV[3],
  'created', now)
if lane ~= '' then redis.call('HSET', KEYS[1], 'lane', lane) end

if delay > 0 then
  redis.call('HSET', KEYS[1], 'state', 'scheduled')
  redis.call('ZADD', KEYS[3], now + delay, id)
  return 2
end
if lane ~= '' then
  local was = lane_servable(P, lane)
  redis.call('SADD', P .. 'lanes', lane)
  redis.call('ZADD', lane_pending_key(P, lane), 0, id)
  lane_settle(P, lane, was)
else
  redis.call('ZADD', KEYS[2], 0, id)
end
wake(P, 1)
return 1
