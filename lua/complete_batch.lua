--[[ complete_batch: complete many jobs in one call (a consumer's acks).
Each job is fenced on its own exactly as in complete; one stale token does
not stop the others.

KEYS[1] active           emq:{q}:active
KEYS[2] meta             emq:{q}:meta
ARGV[1] P                emq:{q}:
ARGV[2], ARGV[3]         id, token of the first job; then the next pair, ...

Reply: one code per job, in order: 1 completed, 0 gone, -1 stale (unchanged),
-2 cancelled (dropped, not completed).
Errors: EMQARG / EMQKIND for a bad argument anywhere (nothing changed).
Event: one completed entry for the jobs completed; cancelled for each dropped.
]]
--- @include "args"
--- @include "now"
--- @include "finish"
--- @include "stats"

local P = arg_prefix(ARGV[1])
if #ARGV < 3 or #ARGV % 2 == 0 or (#ARGV - 1) / 2 > MAX_BATCH then
  arg_fail('ARGV', 'want 1 to ' .. MAX_BATCH .. ' (id, token) pairs after P')
end
arg_key(1, P .. 'active')
arg_key(2, P .. 'meta')
local ids, tokens = {}, {}
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = arg_job(ARGV[i])
  arg_int(ARGV[i + 1], 'token', 1, MAX_TOKEN)
  tokens[#tokens + 1] = ARGV[i + 1]
end
local now = now_ms()
local codes, completed = finish(P, ids, tokens, now)
if completed > 0 then count(P, 'completed', now, completed) end
return codes
