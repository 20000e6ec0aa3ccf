--[[ task_start: a worker starts a Django task's attempt (echomq.contrib.django.tasks).

The task's result record is a hash beside its job, in the queue's slot. It is
marked RUNNING with this attempt's token and worker, unless an earlier
attempt already succeeded (a redelivery: nothing changes). Fields the record
lacks (it expired while the job waited) are filled back in first.

KEYS[1] result record    emq:{q}:task:<id>
KEYS[2] job row          emq:{q}:job:<id>  (read: its base)
ARGV[1] token            the attempts value the claim answered
ARGV[2] worker           host:pid, appended to the record's workers
ARGV[3] now              ISO time: started_at (once) and last_attempted_at
ARGV[4] ttl_ms           the record's new time to live
ARGV[5..] field, value   pairs to fill where the record lacks them

Replies: {status, base, {field, value, ...}}: 'SUCCESSFUL', '0', {} when an
         earlier attempt succeeded; else 'RUNNING', the job's base and the record.
Errors:  EMQARG when the token or ttl is not a number or the fields are not
         in pairs (nothing changed).
]]
if not tonumber(ARGV[1]) or not tonumber(ARGV[4]) or #ARGV % 2 ~= 0 then
  return redis.error_reply('EMQARG task_start: token and ttl must be numbers, fields in pairs')
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'SUCCESSFUL' then return {status, '0', {}} end
for i = 5, #ARGV, 2 do redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
local workers = redis.call('HGET', KEYS[1], 'workers')
if workers and workers ~= '' then workers = workers .. ',' .. ARGV[2] else workers = ARGV[2] end
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[3])
redis.call('HSET', KEYS[1], 'status', 'RUNNING', 'attempt', ARGV[1], 'workers', workers,
  'last_attempted_at', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'RUNNING', redis.call('HGET', KEYS[2], 'base') or '0', redis.call('HGETALL', KEYS[1])}
