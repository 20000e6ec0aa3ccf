--[[ wait: has the job ended? If not, register the caller to be told.

Queue.wait calls this once, then blocks on BLPOP emq:{q}:notify:<id>:<n>,
the list this reply names: the script that ends the job pushes its final
state there for each registered caller (lua/include/waiters.lua). Checking
and registering in one script means an end can never fall between the two.

Each life of a job (from its enqueue or requeue to its end) has a list of
its own: the first registration of a life takes the next number of the
queue's meta 'wait_seq' and keeps it on the row ('wait_seq'); every caller
of that life gets the same number; the end pushes there and clears both
fields. So a push stays for the caller it was made for, however long that
caller takes to send its BLPOP, and a caller of a later life (after a
requeue, or the id enqueued again) never reads an earlier life's push:
nothing has to be deleted.

KEYS[1] job row          emq:{q}:job:<id>
ARGV[1] P                emq:{q}:
ARGV[2] id

Replies: 'completed' (its record is retained: keep.lua), 'dead' (ended
already; nothing registered); {'waiting', n} (registered: the row's 'wait'
count went up by one; BLPOP P..'notify:<id>:<n>'); 0 when there is no row
and no record (removed, cancelled, completed past retention, or never
enqueued).
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
redis.call('HINCRBY', KEYS[1], 'wait', 1)
local n = tonumber(redis.call('HGET', KEYS[1], 'wait_seq'))
if not n then  -- this life's first caller: a list number no earlier life had
  n = redis.call('HINCRBY', P .. 'meta', 'wait_seq', 1)
  redis.call('HSET', KEYS[1], 'wait_seq', n)
end
return {'waiting', n}
