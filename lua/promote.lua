--[[ promote: move due scheduled jobs (delayed or retrying) to their ready set.

KEYS[1] schedule         emq:{q}:schedule
ARGV[1] P                emq:{q}:
ARGV[2] limit            at most this many jobs per call (bounded pass)

Reply: the number of jobs promoted.
Errors: EMQARG for a bad argument (nothing changed).
Event: one promoted entry for the jobs it made ready.
]]
--- @include "args"
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "ready"
--- @include "events"

arg_count(2)
local P = arg_prefix(ARGV[1])
local limit = arg_int(ARGV[2], 'limit', 1, MAX_BATCH)
arg_key(1, P .. 'schedule')

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, limit)
local events = events_batch(P)
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[1], id)
  local jk = P .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then
    make_ready(P, id, jk)
    events_add_row(events, id, jk)
  end
end
emit_batch(P, 'promoted', events, '')
return #due
