--[[ enqueue: admit one job, flat or onto a lane, now or later.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] flat pending     emq:{q}:pending
KEYS[3] schedule         emq:{q}:schedule
ARGV[1] P                emq:{q}:   (lane keys, ring, wake, lanes derive from it)
ARGV[2] id               branded JOB id, the idempotency key
ARGV[3] payload          bytes
ARGV[4] lane             a branded id, or '' for the flat pending set
ARGV[5] delay_ms         0 for ready now
ARGV[6] priority         optional (with 7 and 8): -100..100, higher first in its
                         ready set (priority.lua); 0 by default
ARGV[7] unique_key       '' or a key held while the job lives (unique.lua)
ARGV[8] unique_ttl_ms    0 (held until the job ends) or at most this long (kept
                         on the row as `unique_ttl`, for requeue.lua)

The contract's five arguments, or all eight.
Replies: 1 enqueued, 2 scheduled, 0 duplicate (the row exists; nothing changed);
         the holder's JOB id when another live job holds unique_key (nothing changed).
Errors:  EMQKIND when the id is not JOB-branded; EMQARG for any other bad
         argument (both before anything is written).
Event:   enqueued (data {"run_at": ms} when delayed); none for a duplicate.
]]
--- @include "args"
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "events"
--- @include "priority"
--- @include "unique"

if #ARGV ~= 8 then arg_count(5) end
local P = arg_prefix(ARGV[1])
local id = arg_job(ARGV[2])
local lane = arg_lane(ARGV[4], true)
local delay = arg_int(ARGV[5], 'delay_ms', 0, MAX_MS)
local priority = arg_priority(ARGV[6] or '0')
local ukey = arg_unique(ARGV[7] or '')
local uttl = arg_int(ARGV[8] or '0', 'unique_ttl_ms', 0, MAX_MS)
if ukey == '' and uttl > 0 then arg_fail('unique_ttl_ms', 'a TTL needs a unique_key') end
arg_key(1, P .. 'job:' .. id)
arg_key(2, P .. 'pending')
arg_key(3, P .. 'schedule')
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if ukey ~= '' then
  local holder = unique_holder(P, ukey)
  if holder then return holder end
  unique_take(P, ukey, id, uttl)
end

local now = now_ms()
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '0', 'payload', ARGV[3],
  'created', now)
if lane ~= '' then redis.call('HSET', KEYS[1], 'lane', lane) end
if priority ~= 0 then redis.call('HSET', KEYS[1], 'priority', priority) end
if ukey ~= '' then
  redis.call('HSET', KEYS[1], 'unique', ukey)
  if uttl > 0 then redis.call('HSET', KEYS[1], 'unique_ttl', uttl) end  -- a requeue takes the key again with it
end

if delay > 0 then
  redis.call('HSET', KEYS[1], 'state', 'scheduled')
  redis.call('ZADD', KEYS[3], now + delay, id)
  emit(P, 'enqueued', id, lane, 0, '{"run_at":' .. (now + delay) .. '}')
  return 2
end
local score = ready_score(priority)
if lane ~= '' then
  local was = lane_servable(P, lane)
  redis.call('SADD', P .. 'lanes', lane)
  redis.call('ZADD', lane_pending_key(P, lane), score, id)
  lane_settle(P, lane, was)
else
  redis.call('ZADD', KEYS[2], score, id)
end
wake(P, 1)
emit(P, 'enqueued', id, lane, 0, '')
return 1
