-- Flows: a parent job admitted only when every child has ended
-- (lua/enqueue_flow.lua writes them). One queue, one slot, so each step is
-- part of the script that ends the child.
--   parent row    state 'waiting' until admitted; 'children' (how many),
--                 'children_left' (not ended yet), 'policy' ('fail' or
--                 'ignore': what a child that did not complete does)
--   child row     'parent' = the parent's JOB id
--   P..'flow:<parent>'  hash child id -> JSON: {"state":"pending"} until the
--                 child ends, then {"state":"completed","result":...},
--                 {"state":"dead","error":"..."}, {"state":"cancelled"} or
--                 {"state":"removed"}: what job.children_results() reads
--   P..'waiting'  zset of parents waiting for children, score = created
-- A child's end counts once: only a child whose entry still reads pending
-- moves the count (a child ends once per life; one that is requeued from
-- dead and ends again updates its entry, not the count). The count reaching
-- 0 admits the parent, which happens once.
--- @include "now"
--- @include "ready"
--- @include "stats"
--- @include "keep"
--- @include "events"
--- @include "waiters"

local FLOW_PENDING = '{"state":"pending"}'

local function flow_key(P, parent) return P .. 'flow:' .. parent end

-- A parent ends dead (its own last attempt, or a child under 'fail'): its
-- children's record is kept as long as a dead row is (keep.lua's age bound).
local function flow_parent_dead(P, parent)
  local _, _, _, dead_ms = keep_bounds(P)
  redis.call('PEXPIRE', flow_key(P, parent), dead_ms)
end

-- flow_child_ended(P, child, jk, parent, state): child `child` (row jk, still
-- there) of `parent` ended in `state`.
local function flow_child_ended(P, child, jk, parent, state)
  local fk = flow_key(P, parent)
  local prev = redis.call('HGET', fk, child)
  if not prev then return end  -- its parent ended for good (completed, removed, cancelled)
  if prev ~= FLOW_PENDING and state ~= 'completed' then return end  -- its first end said more
  local entry
  if state == 'completed' then
    entry = '{"state":"completed","result":' .. (redis.call('HGET', jk, 'result') or 'null') .. '}'
  elseif state == 'dead' then
    entry = '{"state":"dead","error":' .. cjson.encode(redis.call('HGET', jk, 'last_error') or '') .. '}'
  else
    entry = '{"state":"' .. state .. '"}'
  end
  redis.call('HSET', fk, child, entry)
  if prev ~= FLOW_PENDING then return end  -- it was counted when it first ended
  local pk = P .. 'job:' .. parent
  local p = redis.call('HMGET', pk, 'state', 'policy', 'lane', 'attempts', 'wait')
  if p[1] ~= 'waiting' then return end  -- the parent died with an earlier child
  local left = redis.call('HINCRBY', pk, 'children_left', -1)
  if state ~= 'completed' and p[2] == 'fail' then
    local now = now_ms()
    redis.call('ZREM', P .. 'waiting', parent)
    redis.call('HSET', pk, 'state', 'dead', 'died', now,
      'last_error', 'child ' .. child .. ' ended ' .. state .. ' (on_child_failure=fail)')
    redis.call('ZADD', P .. 'dead', now, parent)
    count(P, 'dead', now, 1)
    emit(P, 'dead', parent, p[3], p[4], '{"child":"' .. child .. '","child_state":"' .. state .. '"}')
    notify_waiters(P, parent, pk, 'dead', p[5])
    flow_parent_dead(P, parent)
    keep_dead(P, now)
  elseif left <= 0 then
    redis.call('ZREM', P .. 'waiting', parent)
    make_ready(P, parent, pk)
    emit(P, 'admitted', parent, p[3], p[4], '')
  end
end
