--[[ schedule_fire: enqueue a schedule's due ticks and move its cursor on.

The Reaper pass reads a due schedule (its `next` is at or before the server
clock), works out which ticks to fire under its catch_up policy and the
first tick after now (echomq/schedules.py), and sends them here. The script
fires only if the schedule still has the revision and cursor the caller
read (compare-and-set): of reapers racing on one schedule, the first moves
the cursor past every tick it fired and the others change nothing, so each
tick is enqueued once whatever crashes in between. Each tick's JOB id is
tick_job_id(seq, tick) (sched.lua): the caller sends it with its tick and
the script checks it, so an enqueue repeated for a tick whose job still
exists is a duplicate too, and every runtime names ticks the same way.

KEYS[1] schedule         emq:{q}:sched:<name>
KEYS[2] schedules        emq:{q}:schedules
ARGV[1] P                emq:{q}:
ARGV[2] name
ARGV[3] rev              the revision read (the `rev` field)
ARGV[4] expect           the cursor read (the `next` field): the first due tick
ARGV[5] next_ms          the new cursor: the first tick after now
ARGV[6], ARGV[7]         tick, id of the first tick to enqueue; then the next pair, ...
                         (1 to MAX_CATCH_UP + 1 ticks, rising, from expect on, none
                         after the server clock, all before next_ms; id the tick's
                         JOB id, tick_job_id(seq, tick))

Replies: the JOB ids enqueued (a tick whose job exists is left out), or 0
when the schedule is gone, paused, or no longer at rev and expect (another
reaper fired it, or it changed): nothing changed.
Errors: EMQARG for a bad argument, a tick's id included; EMQKIND for an id of another
        brand (nothing changed).
Event: one enqueued entry for the tick jobs it enqueued (data {"schedule": name}).
]]
--- @include "args"
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "ready"
--- @include "sched"
--- @include "events"

if #ARGV < 7 or #ARGV % 2 == 0 or (#ARGV - 5) / 2 > MAX_CATCH_UP + 1 then
  arg_fail('ARGV', 'want P, name, rev, expect, next_ms and 1 to ' .. (MAX_CATCH_UP + 1) .. ' (tick, id) pairs')
end
local P = arg_prefix(ARGV[1])
local name = arg_sched_name(ARGV[2])
local rev = arg_int(ARGV[3], 'rev', 1, MAX_TOKEN)
local expect = arg_tick(ARGV[4], 'expect')
local next_ms = arg_tick(ARGV[5], 'next_ms')
local now = now_ms()
local ticks, named, last = {}, {}, expect - 1
for i = 6, #ARGV, 2 do
  local t = arg_tick(ARGV[i], 'tick')
  if t <= last then arg_fail('tick', 'ticks rise from expect on') end
  ticks[#ticks + 1], named[#named + 1], last = t, arg_job(ARGV[i + 1]), t
end
if last > now then arg_fail('tick', last .. ' is after the server clock') end
if next_ms <= last then arg_fail('next_ms', 'want after the last tick') end
arg_key(1, sched_key(P, name))
arg_key(2, P .. 'schedules')

local s = redis.call('HMGET', KEYS[1], 'rev', 'next', 'paused', 'seq', 'payload', 'lane', 'priority')
if not s[1] or tonumber(s[1]) ~= rev or tonumber(s[2]) ~= expect or s[3] == '1' then return 0 end

local seq, fired = tonumber(s[4]), {}
for i, tick in ipairs(ticks) do
  if named[i] ~= tick_job_id(seq, tick) then
    arg_fail('id', named[i] .. ' is not the JOB id of tick ' .. tick .. ' of ' .. name)
  end
end
local id
local events = events_batch(P)
for _, tick in ipairs(ticks) do
  id = tick_job_id(seq, tick)
  local jk = P .. 'job:' .. id
  if redis.call('EXISTS', jk) == 0 then
    redis.call('HSET', jk, 'attempts', '0', 'payload', s[5], 'created', now, 'sched', name)
    if s[6] ~= '' then redis.call('HSET', jk, 'lane', s[6]) end
    if s[7] ~= '0' then redis.call('HSET', jk, 'priority', s[7]) end
    make_ready(P, id, jk)
    events_add(events, id, s[6], 0)
    fired[#fired + 1] = id
  end
end
emit_batch(P, 'enqueued', events, '{"schedule":' .. cjson.encode(name) .. '}')
redis.call('HSET', KEYS[1], 'next', next_ms, 'last', last, 'last_job', id)
redis.call('ZADD', KEYS[2], next_ms, name)
return fired
