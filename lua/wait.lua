--[[ wait: has the job ended? If not, register the caller to be told.

Queue.wait calls this once, then blocks on BLPOP emq:{q}:notify:<id>: the
script that ends the job pushes its final state there for each registered
caller (lua/include/waiters.lua). Checking and registering in one script
means an end can never fall between the two.

KEYS[1] job row          emq:{q}:job:<id>
ARGV[1] P                emq:{q}:
ARGV[2] id

Replies: 'completed' (its record is retained: keep.lua), 'dead' (ended
already; nothing registered); 'waiting' (registered: the row's 'wait'
count went up by one; the first registration since the job's last end, the
count going from 0 to 1, deletes P..'notify:<id>': what is left there was
pushed at an earlier end, for a waiter that gave up, before a requeue or
the id's enqueue again); 0 when there is no row and no record (removed,
cancelled, completed past retention, or never enqueued).
Errors: EMQARG / EMQKIND for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "replies"

local P, id = arg_job_row(2)

local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  if redis.call('HEXISTS', P .. 'done:rows', id) == 1 then return 'completed' end
  return GONE
end
if state == 'dead' then return 'dead' end
if redis.call('HINCRBY', KEYS[1], 'wait', 1) == 1 then
  redis.call('DEL', P .. 'notify:' .. id)  -- an earlier life's unread pushes
end
return 'waiting'
