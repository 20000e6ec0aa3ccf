-- drop_cancelled(P, id, jk, now): end a leased job that was cancelled. Its
-- worker learns it from the reply of its next fenced call (extend is the
-- heartbeat), or the reaper drops it when the worker is gone. The row, the
-- lease and the lane's active count go; the job is counted as cancelled.
--- @include "lanes"
--- @include "stats"
--- @include "events"
--- @include "ended"
--- @include "unique"

local function drop_cancelled(P, id, jk, now)
  local lane = redis.call('HGET', jk, 'lane')
  redis.call('ZREM', P .. 'active', id)
  if lane and lane ~= '' then lane_release_active(P, lane) end
  emit_row(P, 'cancelled', id, jk, '')
  ended(P, id, jk, 'cancelled')
  unique_release_row(P, id, jk)
  redis.call('DEL', jk)
  count(P, 'cancelled', now, 1)
end
