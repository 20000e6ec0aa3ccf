--[[ result: the holder of the lease leaves a result for its flow's parent.

A child of a flow (enqueue_flow.lua) that calls this before it completes
hands the value to its parent: when it completes, the value is copied into
the parent's children record (flow.lua), which the parent's handler reads
with job.children_results(). It is a value, not a step of the job's life:
no event is written (values may be large or private).

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token
ARGV[4] value            JSON, at most MAX_TEXT (65536) bytes

Replies: 1 recorded, 0 gone (no such row).
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed);
         EMQCANCELLED when the job was cancelled (dropped, as by any fenced call);
         EMQARG / EMQKIND for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "fence"

local P, id = arg_fenced(4)
local value = arg_text(ARGV[4], 'value')
if value == '' or not pcall(cjson.decode, value) then arg_fail('value', 'want JSON text') end

local done = fence_open(P, id)
if done then return done end
redis.call('HSET', KEYS[1], 'result', value)
return 1
