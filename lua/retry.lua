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

Replies: 'scheduled' or 'dead'; 'gone' when the row does not exist.
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed).
]]
--- @include "now"
--- @include "lanes"
--- @include "fence"
--- @include "stats"

local P, id = ARGV[1], ARGV[2]
local verdict = fence(KEYS[1], ARGV[3])
if verdict == 'gone' then return 'gone' end
if verdict == 'stale' then
  return redis.error_reply('EMQSTALE token ' .. ARGV[3] .. ' does not hold ' .. id)
end
local now = now_ms()
local row = redis.call('HMGET', KEYS[1], 'attempts', 'base', 'lane')
local tries = tonumber(row[1]) - tonumber(row[2] or '0')
redis.call('ZREM', KEYS[2], id)
redis.call('HSET', KEYS[1], 'last_error', ARGV[6])
if row[3] and row[3] ~= '' then lane_release_active(P, row[3]) end
if tries >= tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'state', 'dead', 'died', now)
  redis.call('ZADD', KEYS[4], now, id)
  count(P, 'dead', now, 1)
  return 'dead'
end
redis.call('HSET', KEYS[1], 'state', 'scheduled')
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), id)
return 'scheduled'
