--[[ complete: the holder of the lease finishes a job.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token            the attempts value the claim answered

Replies: 1 completed (row deleted, counted), 0 gone (no such row; nothing to do).
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed).
]]
--- @include "now"
--- @include "lanes"
--- @include "fence"
--- @include "stats"

local P, id = ARGV[1], ARGV[2]
local verdict = fence(KEYS[1], ARGV[3])
if verdict == 'gone' then return 0 end
if verdict == 'stale' then
  return redis.error_reply('EMQSTALE token ' .. ARGV[3] .. ' does not hold ' .. id)
end
local lane = redis.call('HGET', KEYS[1], 'lane')
redis.call('ZREM', KEYS[2], id)
redis.call('DEL', KEYS[1])
if lane and lane ~= '' then lane_release_active(P, lane) end
count(P, 'completed', now_ms())
return 1
