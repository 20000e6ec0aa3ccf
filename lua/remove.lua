--[[ remove: delete a job wherever it is. A worker holding it will get 'gone'
when it completes.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] flat pending     emq:{q}:pending
KEYS[3] active           emq:{q}:active
KEYS[4] schedule         emq:{q}:schedule
KEYS[5] dead             emq:{q}:dead
ARGV[1] P                emq:{q}:
ARGV[2] id

Reply: the state the job was in, or 0 (GONE) when there was no such job.
Errors: EMQARG / EMQKIND for a bad argument (nothing changed).
Event: removed (data {"was": state}); none when there was no job.
]]
--- @include "args"
--- @include "lanes"
--- @include "replies"
--- @include "events"
--- @include "ended"
--- @include "unique"

local P, id = arg_job_row(2)
arg_key(2, P .. 'pending')
arg_key(3, P .. 'active')
arg_key(4, P .. 'schedule')
arg_key(5, P .. 'dead')

local row = redis.call('HMGET', KEYS[1], 'state', 'lane', 'counted')
if not row[1] then return GONE end
local lane = row[2]
if lane and lane ~= '' then
  local was = lane_servable(P, lane)
  redis.call('ZREM', lane_pending_key(P, lane), id)
  if row[1] == 'active' and row[3] == '1' and redis.call('HEXISTS', lane_meta_key(P, lane), 'limit') == 1 then
    redis.call('HINCRBY', lane_meta_key(P, lane), 'active', -1)  -- only a limited lane counts (lanes.lua)
  end
  lane_settle(P, lane, was)
end
for i = 2, 5 do redis.call('ZREM', KEYS[i], id) end
emit_row(P, 'removed', id, KEYS[1], '{"was":"' .. row[1] .. '"}')
ended(P, id, KEYS[1], 'removed')
unique_release_row(P, id, KEYS[1])
redis.call('DEL', KEYS[1])
return row[1]
