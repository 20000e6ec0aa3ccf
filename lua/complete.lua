--[[ complete: the holder of the lease finishes a job.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token            the attempts value the claim answered

Replies: 1 completed (row deleted, counted, a record kept), 0 gone (no such row).
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed);
         EMQCANCELLED when the job was cancelled (dropped, not completed);
         EMQARG / EMQKIND for a bad argument (nothing changed).
Event:   completed; a cancelled job's cancelled (lua/include/finish.lua).
]]
--- @include "args"
--- @include "now"
--- @include "replies"
--- @include "finish"
--- @include "stats"

local P, id = arg_fenced(3)

local now = now_ms()
local codes, completed = finish(P, {id}, {ARGV[3]}, now)
if codes[1] == -1 then return stale_reply(id, ARGV[3]) end
if codes[1] == -2 then return cancelled_reply(id) end
if completed > 0 then count(P, 'completed', now, completed) end
return codes[1]
