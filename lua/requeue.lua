--[[ requeue: give a dead-lettered job a fresh set of attempts.

attempts never goes down (it is the fencing token); base is set to it, so
max_attempts counts from here, and the stall count starts again.

A job that held a unique key (row field `unique`; dead-lettering released
it) takes it again, as its enqueue did (unique.lua): P..'unique:'..key names
the job, PEXPIREd at the row's `unique_ttl` when its enqueue gave one (a row
without it, enqueued before rows kept it, holds the key until it ends). The
key is free when it is missing, names a job whose row is gone, or names this
job. When another live job holds it, requeueing would run a second job with
the key: refused with EMQSTATE (naming the holder), nothing changed; requeue
it once the holder has ended, or remove it.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] dead             emq:{q}:dead
ARGV[1] P                emq:{q}:
ARGV[2] id

Reply: 1.
Errors: EMQNOJOB no such job; EMQSTATE the job is not dead, or another live
        job holds its unique key (nothing changed);
        EMQARG / EMQKIND for a bad argument (nothing changed).
Event:  requeued.
]]
--- @include "args"
--- @include "wake"
--- @include "lanes"
--- @include "ready"
--- @include "events"
--- @include "unique"

local P, id = arg_job_row(2)
arg_key(2, P .. 'dead')

local row = redis.call('HMGET', KEYS[1], 'state', 'attempts', 'unique', 'unique_ttl')
if not row[1] then return redis.error_reply('EMQNOJOB no job ' .. id) end
if row[1] ~= 'dead' then
  return redis.error_reply('EMQSTATE job ' .. id .. ' is ' .. row[1] .. ', not dead')
end
local ukey = row[3] ~= '' and row[3] or nil
if ukey then
  local holder = unique_holder(P, ukey)
  if holder and holder ~= id then
    return redis.error_reply('EMQSTATE job ' .. id .. ' not requeued: its unique key ' .. ukey
      .. ' is held by live job ' .. holder)
  end
end
redis.call('ZREM', KEYS[2], id)
redis.call('HSET', KEYS[1], 'base', row[2], 'stalled', 0)
redis.call('HDEL', KEYS[1], 'died')
if ukey then
  -- the TTL the enqueue stored (a canonical decimal within MAX_MS, or none)
  local ttl = row[4] and string.find(row[4], '^[1-9]%d*$') and tonumber(row[4]) or 0
  unique_take(P, ukey, id, ttl <= MAX_MS and ttl or 0)
end
make_ready(P, id, KEYS[1])
redis.call('PERSIST', P .. 'flow:' .. id)  -- a flow parent's children's record (flow.lua)
emit_row(P, 'requeued', id, KEYS[1], '')
return 1
