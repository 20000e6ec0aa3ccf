--[[ extend: the heartbeat; move the lease deadline to server TIME + lease_ms.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
ARGV[1] id
ARGV[2] token
ARGV[3] lease_ms

Replies: the new deadline in server ms; 0 when the row is gone.
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed).
]]
--- @include "now"
--- @include "fence"

local id = ARGV[1]
local verdict = fence(KEYS[1], ARGV[2])
if verdict == 'gone' then return 0 end
if verdict == 'stale' then
  return redis.error_reply('EMQSTALE token ' .. ARGV[2] .. ' does not hold ' .. id)
end
local deadline = now_ms() + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], 'XX', deadline, id)
return deadline
