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
Errors:  EMQKIND when the id is not JOB-branded; EMQARG for any other bad
         argument (both before anything is written).
Event:   enqueued (data {"run_at": ms} when delayed); none for a duplicate.
]]
--- @include "args"
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "events"

arg_count(5)
local P = arg_prefix(ARGV[1])
local id = arg_job(ARGV[2])
local lane = arg_lane(ARGV[4], true)
local delay = arg_int(ARGV[5], 'delay_ms', 0, MAX_MS)
arg_key(1, P .. 'job:' .. id)
arg_key(2, P .. 'pending')
arg_key(3, P .. 'schedule')
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end

local now = now_ms()
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '0', 'payload', ARGV[3],
  'created', now)
if lane ~= '' then redis.call('HSET', KEYS[1], 'lane', lane) end

if delay > 0 then
  redis.call('HSET', KEYS[1], 'state', 'scheduled')
  redis.call('ZADD', KEYS[3], now + delay, id)
  emit(P, 'enqueued', id, lane, 0, '{"run_at":' .. (now + delay) .. '}')
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
emit(P, 'enqueued', id, lane, 0, '')
return 1
