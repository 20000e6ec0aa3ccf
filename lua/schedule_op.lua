--[[ schedule_op: pause, resume or remove one schedule.

A paused schedule keeps its definition and record and fires nothing (its
score in the schedules set is PAUSED, after every tick). Resuming starts again at next_ms,
the first tick after now as the caller computed it: ticks that fell while
it was paused are not made up for.

Two removals are conditional, on the stamp schedule_set keeps (a
ShardedQueue's declarations, one stamp each): 'supersede' removes the
schedule only when it has no stamp or one older (byte by byte) than the
given one, so a copy left on another shard by an older declaration goes
and a newer one stays; 'withdraw' only when its stamp is the given one, so
a declaration that found a newer copy elsewhere removes its own copy and
not one a newer declaration stamped since.

KEYS[1] schedule         emq:{q}:sched:<name>
KEYS[2] schedules        emq:{q}:schedules
KEYS[3] numbers          emq:{q}:sched_numbers (remove frees the schedule's number)
ARGV[1] P                emq:{q}:
ARGV[2] name
ARGV[3] op               'pause' | 'resume' | 'remove' | 'supersede' | 'withdraw'
ARGV[4] next_ms / stamp  for 'resume': the next tick (MIN_TICK..MAX_TICK); for
                         'supersede' and 'withdraw': a stamp (1..64 of
                         [A-Za-z0-9:]); '0' otherwise

Replies: 1 done, 0 no such schedule, -1 kept (supersede: its stamp is not
         older; withdraw: its stamp is another); nothing changed unless 1.
Errors: EMQARG for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "sched"

arg_count(4)
local P = arg_prefix(ARGV[1])
local name = arg_sched_name(ARGV[2])
local op = ARGV[3]
local conditional = op == 'supersede' or op == 'withdraw'
if op ~= 'pause' and op ~= 'resume' and op ~= 'remove' and not conditional then
  arg_fail('op', 'want pause, resume, remove, supersede or withdraw, got "' .. string.sub(op, 1, 40) .. '"')
end
local next_ms, stamp = 0, nil
if op == 'resume' then
  next_ms = arg_tick(ARGV[4], 'next_ms')
elseif conditional then
  stamp = arg_stamp(ARGV[4])
elseif ARGV[4] ~= '0' then
  arg_fail('next_ms', "want '0' unless resuming, superseding or withdrawing")
end
arg_key(1, sched_key(P, name))
arg_key(2, P .. 'schedules')
arg_key(3, P .. 'sched_numbers')

if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if conditional then
  local held = redis.call('HGET', KEYS[1], 'stamp')
  if op == 'supersede' and held and not bytes_less(held, stamp) then return -1 end
  if op == 'withdraw' and held ~= stamp then return -1 end
end
if op == 'remove' or conditional then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], name)
  redis.call('ZREM', KEYS[3], name)
elseif op == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1')
  redis.call('ZADD', KEYS[2], PAUSED, name)
elseif redis.call('HGET', KEYS[1], 'paused') == '1' then  -- resuming a running one changes nothing
  redis.call('HDEL', KEYS[1], 'paused')
  redis.call('HSET', KEYS[1], 'next', next_ms)
  redis.call('HINCRBY', KEYS[1], 'rev', 1)
  redis.call('ZADD', KEYS[2], next_ms, name)
end
return 1
