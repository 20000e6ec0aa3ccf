--[[ cancel: an operator stops a job. A pending or scheduled job is removed
at once. A leased job is marked (cancel = 1) and keeps its lease: its
worker's next fenced call (the heartbeat's extend, or its complete, retry or
release) drops it and answers EMQCANCELLED, so the worker learns within one
heartbeat and its late result is refused. If the worker is gone, reap drops it.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] flat pending     emq:{q}:pending
KEYS[3] schedule         emq:{q}:schedule
ARGV[1] P                emq:{q}:
ARGV[2] id

Replies: 'cancelled' (removed), 'cancelling' (leased: marked).
Errors: EMQNOJOB no such job; EMQSTATE a dead job (remove or requeue it);
        EMQARG / EMQKIND for a bad argument (nothing changed).
Event:  cancelled, or cancelling the first time a leased job is marked.
]]
--- @include "args"
--- @include "now"
--- @include "lanes"
--- @include "stats"
--- @include "events"
--- @include "ended"
--- @include "unique"

local P, id = arg_job_row(2)
arg_key(2, P .. 'pending')
arg_key(3, P .. 'schedule')

local row = redis.call('HMGET', KEYS[1], 'state', 'lane', 'cancel')
local state, lane = row[1], row[2]
if not state then return redis.error_reply('EMQNOJOB no job ' .. id) end
if state == 'active' then
  if row[3] ~= '1' then  -- marked once: a repeated cancel changes nothing
    redis.call('HSET', KEYS[1], 'cancel', '1')
    emit_row(P, 'cancelling', id, KEYS[1], '')
  end
  return 'cancelling'
end
if state == 'dead' then
  return redis.error_reply('EMQSTATE job ' .. id .. ' is dead, not pending, scheduled or active')
end
if state == 'pending' and lane and lane ~= '' then
  local was = lane_servable(P, lane)
  redis.call('ZREM', lane_pending_key(P, lane), id)
  lane_settle(P, lane, was)
end
redis.call('ZREM', KEYS[2], id)
redis.call('ZREM', KEYS[3], id)
emit_row(P, 'cancelled', id, KEYS[1], '')
ended(P, id, KEYS[1], 'cancelled')
unique_release_row(P, id, KEYS[1])
redis.call('DEL', KEYS[1])
count(P, 'cancelled', now_ms(), 1)
return 'cancelled'
