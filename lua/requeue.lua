--[[ requeue: give a dead-lettered job a fresh set of attempts.

attempts never goes down (it is the fencing token); base is set to it, so
max_attempts counts from here, and the stall count starts again.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] dead             emq:{q}:dead
ARGV[1] P                emq:{q}:
ARGV[2] id

Reply: 1.
Errors: EMQNOJOB no such job; EMQSTATE the job is not dead;
        EMQARG / EMQKIND for a bad argument (nothing changed).
Event:  requeued.
]]
--- @include "args"
--- @include "wake"
--- @include "lanes"
--- @include "ready"
--- @include "events"

local P, id = arg_job_row(2)
arg_key(2, P .. 'dead')

local row = redis.call('HMGET', KEYS[1], 'state', 'attempts')
if not row[1] then return redis.error_reply('EMQNOJOB no job ' .. id) end
if row[1] ~= 'dead' then
  return redis.error_reply('EMQSTATE job ' .. id .. ' is ' .. row[1] .. ', not dead')
end
redis.call('ZREM', KEYS[2], id)
redis.call('HSET', KEYS[1], 'base', row[2], 'stalled', 0)
redis.call('HDEL', KEYS[1], 'died')
make_ready(P, id, KEYS[1])
redis.call('PERSIST', P .. 'flow:' .. id)  -- a flow parent's children's record (flow.lua)
emit_row(P, 'requeued', id, KEYS[1], '')
return 1
