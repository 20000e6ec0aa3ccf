--[[ counts: how many jobs are in each state, read in one atomic pass.

KEYS[1] flat pending     emq:{q}:pending
KEYS[2] active           emq:{q}:active
KEYS[3] schedule         emq:{q}:schedule
KEYS[4] dead             emq:{q}:dead
KEYS[5] meta             emq:{q}:meta
KEYS[6] lanes            emq:{q}:lanes
KEYS[7] ring             emq:{q}:ring
ARGV[1] P                emq:{q}:

Reply: {pending, active, scheduled, dead, completed, dead_total, lanes, ring, paused,
cancelled_total, retained, waiting}
pending counts the flat set and every lane; completed and dead_total are
running totals since the queue was created; retained is how many completed
jobs keep a record (keep.lua); waiting is how many flow parents wait for
their children (flow.lua).
Errors: EMQARG for a bad argument.
]]
--- @include "args"
--- @include "lanes"

arg_count(1)
local P = arg_prefix(ARGV[1])
for i, suffix in ipairs({'pending', 'active', 'schedule', 'dead', 'meta', 'lanes', 'ring'}) do
  arg_key(i, P .. suffix)
end
local pending = redis.call('ZCARD', KEYS[1])
local lanes = redis.call('SMEMBERS', KEYS[6])
for _, lane in ipairs(lanes) do
  pending = pending + redis.call('ZCARD', lane_pending_key(P, lane))
end
local m = redis.call('HMGET', KEYS[5], 'completed', 'dead', 'paused', 'cancelled')
return {pending, redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]), tonumber(m[1] or '0'), tonumber(m[2] or '0'),
  #lanes, redis.call('LLEN', KEYS[7]), m[3] == '1' and 1 or 0, tonumber(m[4] or '0'),
  redis.call('ZCARD', P .. 'done'), redis.call('ZCARD', P .. 'waiting')}
