--[[ reap: return jobs whose lease expired (server TIME) to their ready set.

A job that was leased and never finished is presumed to have lost its worker.
Its stall count goes up; past max_stalls it is dead-lettered instead, so a
poison job that kills every worker that touches it cannot loop forever. The
attempts count is left alone: the next claim raises it, which makes the old
worker's token stale. A cancelled job (its worker never heard) is dropped.

KEYS[1] active           emq:{q}:active
KEYS[2] dead             emq:{q}:dead
ARGV[1] P                emq:{q}:
ARGV[2] max_stalls       stalls allowed before dead-lettering
ARGV[3] limit            at most this many jobs per call (bounded pass)

Reply: {returned, dead}
Errors: EMQARG for a bad argument (nothing changed).
Events: stalled (data stalls) or dead (data stalls, error) per job; cancelled per dropped job.
]]
--- @include "args"
--- @include "now"
--- @include "wake"
--- @include "lanes"
--- @include "ready"
--- @include "stats"
--- @include "cancel"
--- @include "keep"
--- @include "events"
--- @include "ended"
--- @include "unique"

arg_count(3)
local P = arg_prefix(ARGV[1])
local max_stalls = arg_int(ARGV[2], 'max_stalls', 0, MAX_COUNT)
local limit = arg_int(ARGV[3], 'limit', 1, MAX_BATCH)
arg_key(1, P .. 'active')
arg_key(2, P .. 'dead')

local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)
local returned, dead = 0, 0
for _, id in ipairs(expired) do
  local jk = P .. 'job:' .. id
  if redis.call('HGET', jk, 'cancel') == '1' then
    drop_cancelled(P, id, jk, now)
  else
    redis.call('ZREM', KEYS[1], id)
    if redis.call('EXISTS', jk) == 1 then
      local row = redis.call('HMGET', jk, 'lane', 'counted')
      lane_release_active(P, row[1], row[2])
      local stalls = redis.call('HINCRBY', jk, 'stalled', 1)
      if stalls > max_stalls then
        redis.call('HSET', jk, 'state', 'dead', 'died', now,
          'last_error', 'stalled ' .. stalls .. ' times: its worker never finished it')
        unique_release_row(P, id, jk)
        redis.call('ZADD', KEYS[2], now, id)
        count(P, 'dead', now, 1)
        emit_row(P, 'dead', id, jk, '{"error":"stalled ' .. stalls .. ' times","stalls":' .. stalls .. '}')
        ended(P, id, jk, 'dead')
        dead = dead + 1
      else
        make_ready(P, id, jk)
        emit_row(P, 'stalled', id, jk, '{"stalls":' .. stalls .. '}')
        returned = returned + 1
      end
    end
  end
end
if dead > 0 then keep_dead(P, now) end
-- lease expiries reaped, for the metrics endpoint (meta field 'reaped')
if returned + dead > 0 then redis.call('HINCRBY', P .. 'meta', 'reaped', returned + dead) end
return {returned, dead}
