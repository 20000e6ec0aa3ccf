--[[ enqueue_flow: admit a parent job and its children in one step.

The children are ready at once (flat or on their lanes); the parent waits
(state 'waiting', in P..'waiting') until every child has ended, and is then
made ready by the script that ended the last one (lua/include/flow.lua). A
child that ends other than completed (dead, cancelled, removed) sends the
parent to dead naming it under on_child_failure 'fail'; under 'ignore' it
counts as ended and the parent runs, reading which failed from its
children's record (P..'flow:<parent id>').

KEYS[1] parent row       emq:{q}:job:<id>
ARGV[1] P                emq:{q}:
ARGV[2] id               the parent's branded JOB id, the flow's idempotency key
ARGV[3] payload          the parent's payload (bytes)
ARGV[4] lane             the parent's lane: a branded id, or ''
ARGV[5] on_child_failure 'fail' | 'ignore'
ARGV[6], ARGV[7], ARGV[8]  child, child_payload, child_lane of the first child
                         (child_lane: a branded id or ''); then the next
                         child's three, ... (1 to MAX_BATCH children)

Replies: 1 admitted; 0 duplicate (the parent's row exists; nothing changed).
Errors:  EMQSTATE a child's id has a row already (nothing changed);
         EMQKIND / EMQARG for a bad argument, a repeated id (nothing changed).
Events:  one enqueued entry for the children (data {"parent": id}), then one
         for the parent (data {"children": n, "on_child_failure": policy}).
]]
--- @include "args"
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "ready"
--- @include "events"
--- @include "chunks"

local P = arg_prefix(ARGV[1])
local parent = arg_job(ARGV[2])
local parent_lane = arg_lane(ARGV[4], true)
local policy = ARGV[5]
if policy ~= 'fail' and policy ~= 'ignore' then
  arg_fail('on_child_failure', "want 'fail' or 'ignore', got \"" .. string.sub(tostring(policy), 1, 40) .. '"')
end
if #ARGV < 8 or (#ARGV - 5) % 3 ~= 0 or (#ARGV - 5) / 3 > MAX_BATCH then
  arg_fail('ARGV', 'want 1 to ' .. MAX_BATCH .. ' (id, payload, lane) children after the parent')
end
arg_key(1, P .. 'job:' .. parent)
local seen = {[parent] = true}
for i = 6, #ARGV, 3 do
  local child = arg_job(ARGV[i])
  if seen[child] then arg_fail('id', child .. ' appears twice in the flow') end
  seen[child] = true
  arg_lane(ARGV[i + 2], true)
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 6, #ARGV, 3 do
  if redis.call('EXISTS', P .. 'job:' .. ARGV[i]) == 1 then
    return redis.error_reply('EMQSTATE child ' .. ARGV[i] .. ' exists already: a flow admits new jobs only')
  end
end

local now = now_ms()
local n = (#ARGV - 5) / 3
local record, events = {}, events_batch(P)
for i = 6, #ARGV, 3 do
  local child, lane = ARGV[i], ARGV[i + 2]
  local jk = P .. 'job:' .. child
  redis.call('HSET', jk, 'state', 'pending', 'attempts', '0', 'payload', ARGV[i + 1], 'created', now,
    'parent', parent)
  if lane ~= '' then redis.call('HSET', jk, 'lane', lane) end
  make_ready(P, child, jk)
  events_add(events, child, lane, 0)
  record[#record + 1] = child
  record[#record + 1] = '{"state":"pending"}'
end
in_chunks('HSET', P .. 'flow:' .. parent, record, 1000)
emit_batch(P, 'enqueued', events, '{"parent":"' .. parent .. '"}')
redis.call('HSET', KEYS[1], 'state', 'waiting', 'attempts', '0', 'payload', ARGV[3], 'created', now,
  'children', n, 'children_left', n, 'policy', policy)
if parent_lane ~= '' then redis.call('HSET', KEYS[1], 'lane', parent_lane) end
redis.call('ZADD', P .. 'waiting', now, parent)
emit(P, 'enqueued', parent, parent_lane, 0, '{"children":' .. n .. ',"on_child_failure":"' .. policy .. '"}')
return 1
