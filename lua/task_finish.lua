--[[ task_finish: record how a Django task's attempt ended (echomq.contrib.django.tasks).

Only the attempt of the latest start writes (the record's attempt is its
token: task_start), and a SUCCESSFUL record is final. The status names what
the other arguments carry, so a record reads back whole:

  READY       failed, attempts remain: errors (finished_at, return_value '')
  FAILED      failed for good: errors, finished_at (return_value '')
  SUCCESSFUL  errors '' (earlier attempts' stay), finished_at, return_value

No event, as for task_start: the job's retry or complete that follows is
the step of its life, and the record holds results the stream never carries.

KEYS[1] result record    emq:{q}:task:<id>
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token            the attempts value the claim answered
ARGV[4] ttl_ms           the record's new time to live, 1..MAX_MS
ARGV[5] status           READY (to run again), FAILED or SUCCESSFUL
ARGV[6] errors           the record's errors, a JSON array; '' with SUCCESSFUL
ARGV[7] finished_at      ISO 8601 time (datetime.isoformat()); '' with READY
ARGV[8] return_value     the task's return value, JSON; '' unless SUCCESSFUL

Replies: 1 written; 0 not written, nothing changed: no record, another
         attempt started since (the record's attempt is not token), or the
         record is SUCCESSFUL already.
Errors:  EMQARG / EMQKIND for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "task"

arg_count(8)
local P = arg_prefix(ARGV[1])
local id = arg_job(ARGV[2])
local token = ARGV[3]
arg_int(token, 'token', 1, MAX_TOKEN)
arg_int(ARGV[4], 'ttl_ms', 1, MAX_MS)
local status = ARGV[5]
if status ~= 'READY' and status ~= 'FAILED' and status ~= 'SUCCESSFUL' then
  arg_fail('status', 'want READY, FAILED or SUCCESSFUL, got "' .. string.sub(status, 1, 40) .. '"')
end
local ok = status == 'SUCCESSFUL'
if ok then arg_empty(ARGV[6], 'errors', 'with SUCCESSFUL') else arg_json(ARGV[6], 'errors', '[') end
if status == 'READY' then arg_empty(ARGV[7], 'finished_at', 'with READY') else arg_time(ARGV[7], 'finished_at') end
if ok then arg_json(ARGV[8], 'return_value') else arg_empty(ARGV[8], 'return_value', 'unless SUCCESSFUL') end
arg_key(1, task_key(P, id))

local rec = KEYS[1]
local current = redis.call('HMGET', rec, 'attempt', 'status')
if current[1] ~= token or current[2] == 'SUCCESSFUL' then return 0 end
local fields = {'status', status}
for i, field in ipairs({'errors', 'finished_at', 'return'}) do
  if ARGV[5 + i] ~= '' then table.insert(fields, field); table.insert(fields, ARGV[5 + i]) end
end
redis.call('HSET', rec, unpack(fields))
redis.call('PEXPIRE', rec, ARGV[4])
return 1
