--[[ schedule_set: create or replace a schedule (lua/include/sched.lua).

The caller parses the cron expression or interval and computes the first
tick after now (echomq/schedules.py); the script checks the shape of every
argument and stores it. Storing an identical definition again changes
nothing, so a process that declares its schedules at every start keeps
their cursor, record and pause. A changed definition starts again at
next_ms and keeps the record (last run, last job) and a pause.

Each schedule has a number `seq`, in every tick's JOB id (sched.lua), and
no two schedules of a queue hold one at once: seq = k * seq_step +
seq_offset, with k the first class index (0 .. SCHED_SEQS / seq_step - 1,
then round again) after the meta's sched_seq (the last one given) that the
numbers zset does not hold. A row whose number the numbers zset does not
give it (stored before the zset, or of another class) is numbered again,
even when its definition is the same (answers 2: its ticks' ids change;
its cursor, record and pause stay).

A stamp (a ShardedQueue's declaration: it keeps one copy of a schedule, on
its lane's shard, and removes the copies on the other shards that older
declarations left, see schedule_op's supersede) is kept on the row as
`stamp` at every call that gives one, also when the definition is the same.

KEYS[1] schedule         emq:{q}:sched:<name>
KEYS[2] schedules        emq:{q}:schedules
KEYS[3] numbers          emq:{q}:sched_numbers
ARGV[1] P                emq:{q}:
ARGV[2] name             1..64 of [A-Za-z0-9._-]
ARGV[3] kind             'cron' or 'every'
ARGV[4] spec             the cron expression (1..MAX_CRON printable bytes), or
                         every_ms (1..MAX_MS)
ARGV[5] tz               the cron's time zone name (1..MAX_CRON of [A-Za-z0-9_+/-])
ARGV[6] payload          bytes, each tick's job payload
ARGV[7] lane             '' or the lane of each tick's job
ARGV[8] priority         -100..100
ARGV[9] catch_up         0..MAX_CATCH_UP missed ticks one fire makes up for
ARGV[10] next_ms         the first tick (MIN_TICK..MAX_TICK)
ARGV[11] seq_step        1..1024 and 0..seq_step-1: the class of this queue's
ARGV[12] seq_offset      numbers. A plain queue sends 1, 0; shard i of S sends
                         S, i, so no two shards of a queue number schedules alike.
ARGV[13] stamp           '' (none: the row's stays) or 1..64 of [A-Za-z0-9:],
                         this declaration's stamp (compared byte by byte)

Replies: 1 created, 2 replaced (or numbered again), 0 unchanged (the
         definition; the stamp, if given, is written).
Errors: EMQARG for a bad argument, or when every number of the class is held
        (nothing changed).
]]
--- @include "args"
--- @include "priority"
--- @include "sched"

arg_count(13)
local P = arg_prefix(ARGV[1])
local name = arg_sched_name(ARGV[2])
local kind = ARGV[3]
if kind == 'every' then
  arg_int(ARGV[4], 'every_ms', 1, MAX_MS)
elseif kind == 'cron' then
  if #ARGV[4] == 0 or #ARGV[4] > MAX_CRON or string.find(ARGV[4], '[^ -~]') then
    arg_fail('cron', 'want 1 to ' .. MAX_CRON .. ' printable ASCII bytes')
  end
else
  arg_fail('kind', "want 'cron' or 'every', got \"" .. string.sub(kind, 1, 40) .. '"')
end
if #ARGV[5] == 0 or #ARGV[5] > MAX_CRON or not string.find(ARGV[5], '^[%w_%+/%-]+$') then
  arg_fail('tz', 'want 1 to ' .. MAX_CRON .. ' of [A-Za-z0-9_+/-]')
end
arg_lane(ARGV[7], true)
arg_priority(ARGV[8])
arg_int(ARGV[9], 'catch_up', 0, MAX_CATCH_UP)
local next_ms = arg_tick(ARGV[10], 'next_ms')
local step = arg_int(ARGV[11], 'seq_step', 1, 1024)
local offset = arg_int(ARGV[12], 'seq_offset', 0, step - 1)
local stamp = arg_stamp(ARGV[13], true)
arg_key(1, sched_key(P, name))
arg_key(2, P .. 'schedules')
arg_key(3, P .. 'sched_numbers')

local fields = {'kind', 'spec', 'tz', 'payload', 'lane', 'priority', 'catch_up'}
local old = redis.call('HMGET', KEYS[1], 'seq', unpack(fields))
local created = old[2] == false
local same = not created
for i = 1, #fields do
  if old[i + 1] ~= ARGV[i + 2] then same = false end
end
local slots = math.floor(SCHED_SEQS / step)
local seq = tonumber(old[1])
local k                         -- set when the schedule takes a new number
if created or not seq or seq % step ~= offset or seq >= SCHED_SEQS
    or tonumber(redis.call('ZSCORE', KEYS[3], name)) ~= (seq - offset) / step then
  k = sched_free_number(KEYS[3], tonumber(redis.call('HGET', P .. 'meta', 'sched_seq') or '0') + 1, slots)
  if not k then arg_fail('name', 'every schedule number of this queue (' .. slots .. ') is held') end
end
if stamp ~= '' then redis.call('HSET', KEYS[1], 'stamp', stamp) end
if same and not k then return 0 end

if k then
  redis.call('HSET', P .. 'meta', 'sched_seq', k)
  redis.call('ZADD', KEYS[3], k, name)
  redis.call('HSET', KEYS[1], 'seq', k * step + offset)
end
redis.call('HINCRBY', KEYS[1], 'rev', 1)
if same then return 2 end     -- numbered again; the rest stays
local def = {}
for i = 1, #fields do
  def[#def + 1] = fields[i]
  def[#def + 1] = ARGV[i + 2]
end
redis.call('HSET', KEYS[1], 'next', next_ms, unpack(def))
if redis.call('HGET', KEYS[1], 'paused') == '1' then
  redis.call('ZADD', KEYS[2], PAUSED, name)
else
  redis.call('ZADD', KEYS[2], next_ms, name)
end
return created and 1 or 2
