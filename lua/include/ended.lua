-- ended(P, id, jk, state, info): job `id` (row jk, not deleted yet) has just
-- ended: 'completed', 'dead', 'cancelled' or 'removed'. Tells the callers
-- waiting for it (waiters.lua) and its flow (flow.lua): as a child, its
-- parent counts it; as a parent, its children's record goes with it (kept
-- while a dead parent's row is). `info` = the row's {parent, wait, children}
-- when the caller read them already (finish does, in its own HMGET), else nil.
-- One line at every site where a job ends.
--- @include "waiters"
--- @include "flow"

local function ended(P, id, jk, state, info)
  local r = info or redis.call('HMGET', jk, 'parent', 'wait', 'children')
  if r[2] then notify_waiters(P, id, jk, state, r[2]) end
  if r[1] and r[1] ~= '' then flow_child_ended(P, id, jk, r[1], state) end
  if r[3] then
    redis.call('ZREM', P .. 'waiting', id)
    if state == 'dead' then flow_parent_dead(P, id) else redis.call('DEL', flow_key(P, id)) end
  end
end
