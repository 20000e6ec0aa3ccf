--[[ release: the holder hands back a job it never started (a stopping
consumer's prefetched jobs). The job is ready again at once and the claim
does not count against max_attempts (base is raised with attempts, which
itself never goes down, so the old token stays stale).

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token

Replies: 1 released, 0 gone.
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed);
         EMQCANCELLED when the job was cancelled (dropped, not released);
         EMQARG / EMQKIND for a bad argument (nothing changed).
Event:   released; cancelled when it drops the job.
]]
--- @include "args"
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "ready"
--- @include "replies"
--- @include "fence"
--- @include "cancel"
--- @include "events"

local P, id = arg_fenced(3)

local done = fence_open(P, id)
if done then return done end
redis.call('ZREM', KEYS[2], id)
redis.call('HINCRBY', KEYS[1], 'base', 1)
local row = redis.call('HMGET', KEYS[1], 'lane', 'counted')
lane_release_active(P, row[1], row[2])
make_ready(P, id, KEYS[1])
emit_row(P, 'released', id, KEYS[1], '')
return 1
