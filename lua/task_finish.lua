--[[ task_finish: record how a Django task's attempt ended (echomq.contrib.django.tasks).

Only the holder of the latest start writes (the record's attempt is its
token), and a SUCCESSFUL record is final.

KEYS[1] result record    emq:{q}:task:<id>
ARGV[1] token            the attempts value the claim answered
ARGV[2] ttl_ms           the record's new time to live
ARGV[3..] field, value   at least one pair to set (status, finished_at, return, errors)

Replies: 1 written; 0 when another attempt started since or the record already succeeded.
Errors:  EMQARG when the token or ttl is not a number or the fields are not
         in pairs (nothing changed).
]]
if not tonumber(ARGV[1]) or not tonumber(ARGV[2]) or #ARGV % 2 ~= 0 or #ARGV < 4 then
  return redis.error_reply('EMQARG task_finish: token and ttl must be numbers, fields in pairs')
end
if redis.call('HGET', KEYS[1], 'attempt') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') == 'SUCCESSFUL' then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
