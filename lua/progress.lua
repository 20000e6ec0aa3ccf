--[[ progress: the holder of the lease records how far its job has got.

The value is JSON text of at most MAX_PROGRESS bytes; it replaces the row's
'progress' field and goes into the event stream as a 'progress' entry.

KEYS[1] job row          emq:{q}:job:<id>
KEYS[2] active           emq:{q}:active
ARGV[1] P                emq:{q}:
ARGV[2] id
ARGV[3] token
ARGV[4] value            JSON, at most MAX_PROGRESS (1024) bytes

Replies: 1 recorded, 0 gone (no such row).
Errors:  EMQSTALE when the token no longer holds the lease (nothing changed);
         EMQCANCELLED when the job was cancelled (dropped, as by any fenced call);
         EMQARG / EMQKIND for a bad argument (nothing changed).
Event:   progress, data {"value": <the value>}.
]]
--- @include "args"
--- @include "fence"
--- @include "events"

local P, id = arg_fenced(4)
local value = ARGV[4]
if #value > MAX_PROGRESS then arg_fail('value', 'longer than ' .. MAX_PROGRESS .. ' bytes') end
if value == '' or not pcall(cjson.decode, value) then arg_fail('value', 'want JSON text') end

local done = fence_open(P, id)
if done then return done end
redis.call('HSET', KEYS[1], 'progress', value)
emit_row(P, 'progress', id, KEYS[1], '{"value":' .. value .. '}')
return 1
