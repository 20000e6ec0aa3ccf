--[[ retry: the holder of the lease failed; try again later or dead-letter.

Attempts since the job was last (re)admitted are attempts - base; when they
reach max_attempts the job goes to dead, otherwise to the schedule.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
KEYS[3] schedule         emq:{q}:schedule
KEYS[4] dead             emq:{q}:dead
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token
ARGV[4] delay_ms
ARGV[5] max_attempts
ARGV[6] error            recorded as last_error

Replies: 'scheduled' or 'dead'; 0 when the row is gone.
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed);
         EMQCANCELLED when the job was cancelled (dropped, not retried);
         EMQARG / EMQKIND for a bad argument (nothing changed).
Event:   retried (data run_at, delay_ms, error) or dead (data error).
]]
--- @include "args"
--- @include "now"
--- @include "lanes"
--- @include "replies"
--- @include "fence"
--- @include "cancel"
--- @include "stats"
--- @include "keep"
--- @include "events"
--- @include "ended"
--- @include "unique"

local P, id = arg_fenced(6)
local delay = arg_int(ARGV[4], 'delay_ms', 0, MAX_MS)
local max_attempts = arg_int(ARGV[5], 'max_attempts', 1, MAX_COUNT)
arg_text(ARGV[6], 'error')
arg_key(3, P .. 'schedule')
arg_key(4, P .. 'dead')

local done, now = fence_open(P, id)
if done then return done end
local row = redis.call('HMGET', KEYS[1], 'attempts', 'base', 'lane', 'counted')
local tries = tonumber(row[1]) - tonumber(row[2] or '0')
redis.call('ZREM', KEYS[2], id)
redis.call('HSET', KEYS[1], 'last_error', ARGV[6])
lane_release_active(P, row[3], row[4])
if tries >= max_attempts then
  redis.call('HSET', KEYS[1], 'state', 'dead', 'died', now)
  unique_release_row(P, id, KEYS[1])
  redis.call('ZADD', KEYS[4], now, id)
  count(P, 'dead', now, 1)
  emit(P, 'dead', id, row[3], row[1], '{"error":' .. cjson.encode(brief(ARGV[6])) .. '}')
  ended(P, id, KEYS[1], 'dead')
  keep_dead(P, now)
  return 'dead'
end
redis.call('HSET', KEYS[1], 'state', 'scheduled')
redis.call('ZADD', KEYS[3], now + delay, id)
emit(P, 'retried', id, row[3], row[1],
  '{"run_at":' .. (now + delay) .. ',"delay_ms":' .. delay .. ',"error":' .. cjson.encode(brief(ARGV[6])) .. '}')
return 'scheduled'
