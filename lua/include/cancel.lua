-- drop_cancelled(P, id, jk, now): end a leased job that was cancelled. Its
-- worker learns it from the reply of its next fenced call (extend is the
-- heartbeat), or the reaper drops it when the worker is gone. The row, the
-- lease and (under a lane limit) the lane's count go; the job is counted as cancelled.
--- @include "lanes"
--- @include "stats"
--- @include "events"
--- @include "ended"
--- @include "unique"

local function drop_cancelled(P, id, jk, now)
  local row = redis.call('HMGET', jk, 'lane', 'counted')
  redis.call('ZREM', P .. 'active', id)
  lane_release_active(P, row[1], row[2])
  emit_row(P, 'cancelled', id, jk, '')
  ended(P, id, jk, 'cancelled')
  unique_release_row(P, id, jk)
  redis.call('DEL', jk)
  count(P, 'cancelled', now, 1)
end
