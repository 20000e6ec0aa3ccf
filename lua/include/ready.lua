-- make_ready(P, id, jk): put job `id` (row key jk) back in its ready set: its
-- lane's pending set (re-ringing the lane) or the flat pending set; mark the
-- row pending and push a wake token so a parked consumer picks it up.
--- @include "wake"
--- @include "lanes"

local function make_ready(P, id, jk)
  redis.call('HSET', jk, 'state', 'pending')
  local lane = redis.call('HGET', jk, 'lane')
  if lane and lane ~= '' then
    local was = lane_servable(P, lane)
    redis.call('SADD', P .. 'lanes', lane)
    redis.call('ZADD', lane_pending_key(P, lane), 0, id)
    lane_settle(P, lane, was)
  else
    redis.call('ZADD', P .. 'pending', 0, id)
  end
  wake(P, 1)
end
