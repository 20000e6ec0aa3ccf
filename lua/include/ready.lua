-- make_ready(P, id, jk): put job `id` (row key jk) back in its ready set: its
-- lane's pending set (re-ringing the lane) or the flat pending set; mark the
-- row pending and push a wake token so a parked consumer picks it up. The
-- row's priority is its score (priority.lua), so a delayed, retried, reaped
-- or released job keeps it.
--- @include "wake"
--- @include "lanes"
--- @include "priority"

local function make_ready(P, id, jk)
  redis.call('HSET', jk, 'state', 'pending')
  local row = redis.call('HMGET', jk, 'lane', 'priority')
  local lane, score = row[1], ready_score(row[2])
  if lane and lane ~= '' then
    local was = lane_servable(P, lane)
    redis.call('SADD', P .. 'lanes', lane)
    redis.call('ZADD', lane_pending_key(P, lane), score, id)
    lane_settle(P, lane, was)
  else
    redis.call('ZADD', P .. 'pending', score, id)
  end
  wake(P, 1)
end
