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
--- @include "finish"
--- @include "stats"

local P, id = ARGV[1], ARGV[2]
local codes, completed = finish(P, {id}, {ARGV[3]})
if codes[1] == -1 then
  return redis.error_reply('EMQSTALE token ' .. ARGV[3] .. ' does not hold ' .. id)
end
if completed > 0 then count(P, 'completed', now_ms(), completed) end
return codes[1]
