--[[ task_start: a worker starts a Django task's attempt (echomq.contrib.django.tasks).

The task's result record is a hash beside its job, in the queue's slot. The
caller must hold the job's lease, as for every fenced call: the row active
with attempts = token, so a worker whose lease was reaped can neither run
the task again nor take the record from the attempt that holds it now. The
record is then marked RUNNING with this attempt's token, the latest start
(task_finish writes only for it), unless an earlier attempt already
succeeded (a redelivery: nothing changes and the caller acknowledges the
job without running it). Fields the record lacks (it expired while the job
waited) are filled back in from the task's payload first. The job row is
only read: a cancel mark is left to the holder's next fenced call on the job
(its heartbeat), which drops it. No event: the job's own steps (claimed,
completed, retried, dead) are in the stream already, and a record holds the
task's arguments and results, which the stream never carries.

KEYS[1] result record    emq:{q}:task:<id>
KEYS[2] job row          emq:{q}:job:<id>  (read: its state, attempts and base)
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token            the attempts value the claim answered
ARGV[4] worker           host:pid, 1 to MAX_WORKER (255) bytes without ','; appended to the record's workers
ARGV[5] now              ISO 8601 time (datetime.isoformat()): started_at (once) and last_attempted_at
ARGV[6] ttl_ms           the record's new time to live, 1..MAX_MS
ARGV[7] record           the task's payload: a JSON object of text fields, each one of task, backend,
                         queue, args, kwargs, status, enqueued_at, run_after, errors, priority;
                         those the record lacks are filled in

Replies: {'RUNNING', base, {field, value, ...}}: the job row's base ('0' when
         absent) and the record as it is now; {'SUCCESSFUL', base, {}} when an
         earlier attempt succeeded (nothing changed); 0 when the job has no row
         (removed; nothing changed).
Errors:  EMQSTALE when the token does not hold the job (the row is not active
         with attempts = token; nothing changed);
         EMQARG / EMQKIND for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "replies"
--- @include "task"

arg_count(7)
local P = arg_prefix(ARGV[1])
local id = arg_job(ARGV[2])
local token = ARGV[3]
arg_int(token, 'token', 1, MAX_TOKEN)
local worker = arg_worker(ARGV[4])
local now = arg_time(ARGV[5], 'now')
arg_int(ARGV[6], 'ttl_ms', 1, MAX_MS)
local fill = arg_fill(ARGV[7])
arg_key(1, task_key(P, id))
arg_key(2, P .. 'job:' .. id)

local row = redis.call('HMGET', KEYS[2], 'state', 'attempts', 'base')
if not row[1] then return GONE end
if row[1] ~= 'active' or row[2] ~= token then return stale_reply(id, token) end
local base = row[3] or '0'
local rec = KEYS[1]
if redis.call('HGET', rec, 'status') == 'SUCCESSFUL' then return {'SUCCESSFUL', base, {}} end
for _, f in ipairs(TASK_FILL) do
  if fill[f] then redis.call('HSETNX', rec, f, fill[f]) end
end
local workers = redis.call('HGET', rec, 'workers')
if workers and workers ~= '' then workers = workers .. ',' .. worker else workers = worker end
redis.call('HSETNX', rec, 'started_at', now)
redis.call('HSET', rec, 'status', 'RUNNING', 'attempt', token, 'workers', workers, 'last_attempted_at', now)
redis.call('PEXPIRE', rec, ARGV[6])
return {'RUNNING', base, redis.call('HGETALL', rec)}
