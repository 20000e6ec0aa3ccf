--[[ complete_batch: complete many jobs in one call (a consumer's acks).
Each job is fenced on its own exactly as in complete; one stale token does
not stop the others.

KEYS[1] active           emq:{q}:active
KEYS[2] meta             emq:{q}:meta
ARGV[1] P                emq:{q}:
ARGV[2], ARGV[3]         id, token of the first job; then the next pair, ...

Reply: one code per job, in order: 1 completed, 0 gone, -1 stale (unchanged).
]]
--- @include "now"
--- @include "finish"
--- @include "stats"

local P = ARGV[1]
local ids, tokens = {}, {}
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  tokens[#tokens + 1] = ARGV[i + 1]
end
local codes, completed = finish(P, ids, tokens)
if completed > 0 then count(P, 'completed', now_ms(), completed) end
return codes
