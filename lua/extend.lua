--[[ extend: the heartbeat; move the lease deadline to server TIME + lease_ms.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token
ARGV[4] lease_ms

Replies: the new deadline in server ms; 0 when the row is gone.
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed);
         EMQCANCELLED when the job was cancelled: it is dropped now, and the
         worker stops it (this reply is how a worker learns of a cancel);
         EMQARG / EMQKIND for a bad argument (nothing changed).
Event:   none (a heartbeat is not a transition); cancelled when it drops the job.
]]
--- @include "args"
--- @include "now"
--- @include "replies"
--- @include "fence"
--- @include "cancel"

local P, id = arg_fenced(4)
local lease = arg_int(ARGV[4], 'lease_ms', 1, MAX_MS)

local done, now = fence_open(P, id)
if done then return done end
local deadline = now + lease
redis.call('ZADD', KEYS[2], 'XX', deadline, id)
return deadline
