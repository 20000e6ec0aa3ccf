--[[ promote: move due scheduled jobs (delayed or retrying) to their ready set.

KEYS[1] schedule         emq:{q}:schedule
ARGV[1] P                emq:{q}:
ARGV[2] limit            at most this many jobs per call (bounded pass)

Reply: the number of jobs promoted.
]]
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "ready"

local P = ARGV[1]
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local jk = P .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then make_ready(P, id, jk) end
end
return #due
