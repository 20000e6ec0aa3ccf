-- Schedules. Schedule N of queue P is the hash P..'sched:'..N (its
-- definition, cursor and record, see docs/echomq.md) and a member of the
-- zset P..'schedules', scored by its next run (server ms; PAUSED while
-- paused, past every tick, so a paused one is never due).
--
-- A tick's JOB id is a function of the schedule and the tick: the snowflake
-- of the tick's millisecond with the schedule's 21-bit number `seq` in the
-- node and sequence bits, the sequence's top bit set. A minter never sets it
-- (ids.py: minted sequences are 0..2047), so no minted id is a tick's. A tick
-- fired twice is the same JOB (the enqueue is idempotent), and tick jobs
-- sort by tick time among other jobs.
--- @include "args"
local MAX_CATCH_UP = 1000       -- missed ticks one fire may make up for
local MAX_CRON = 128            -- a cron expression / time zone name, in bytes
local MIN_TICK = 1704067200000  -- ticks are ids: from 2024-01-01T00:00:00Z (the id epoch)
local MAX_TICK = 3903090455551  -- ... to the last millisecond 41 bits hold
local SCHED_SEQS = 2097152      -- 2^21 schedule numbers per queue, then they wrap
local PAUSED = 9999999999999    -- a paused schedule's score: after MAX_TICK, so never due

local function sched_key(P, name) return P .. 'sched:' .. name end

-- A schedule name: 1 to 64 of [A-Za-z0-9._-].
local function arg_sched_name(v)
  if type(v) ~= 'string' or #v > 64 or not string.find(v, '^[%w%._%-]+$') then
    arg_fail('name', 'want 1 to 64 of [A-Za-z0-9._-], got "' .. string.sub(tostring(v), 1, 40) .. '"')
  end
  return v
end

local function arg_tick(v, what) return arg_int(v, what, MIN_TICK, MAX_TICK) end

-- A declaration's stamp (a ShardedQueue's, see schedule_set): 1 to 64 of
-- [A-Za-z0-9:]; '' (none) where `none_ok`.
local function arg_stamp(v, none_ok)
  if none_ok and v == '' then return v end
  if type(v) ~= 'string' or #v > 64 or not string.find(v, '^[%w:]+$') then
    arg_fail('stamp', 'want 1 to 64 of [A-Za-z0-9:], got "' .. string.sub(tostring(v), 1, 40) .. '"')
  end
  return v
end

-- a < b, byte by byte (Lua's own < on strings follows the server's locale).
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The first class index k, from `from` up to slots - 1 and then from 0, that
-- the numbers zset (member: schedule name, score: its k) does not hold; nil
-- when it holds every one. Read-only: a page of held indexes at a time, so
-- a run of held ones costs one call per 100.
local function sched_free_number(numbers, from, slots)
  local function first_free(c, to)
    while c <= to do
      local held = redis.call('ZRANGEBYSCORE', numbers, c, to, 'WITHSCORES', 'LIMIT', 0, 100)
      if #held == 0 then return c end
      for i = 2, #held, 2 do
        local s = tonumber(held[i])
        if s > c then return c end
        c = s + 1
      end
    end
    return nil
  end
  from = from % slots
  return first_free(from, slots - 1) or first_free(0, from - 1)
end

local B62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

-- 'JOB' .. base62((tick - MIN_TICK) * 2^22 + node * 2^12 + 2048 + low), 11
-- digits, where schedule number seq (taken mod SCHED_SEQS) is node * 2^11 + low.
-- The value passes 2^53, so it is kept as two exact parts (hi * 2^22 + lo)
-- and divided by 62 part by part.
local function tick_job_id(seq, tick)
  local n = seq % SCHED_SEQS
  local low = n % 2048
  local hi, lo = tick - MIN_TICK, (n - low) * 2 + 2048 + low
  local digits = {}
  for i = 11, 1, -1 do
    local r1 = hi % 62
    hi = (hi - r1) / 62
    local x = r1 * 4194304 + lo
    local r = x % 62
    lo = (x - r) / 62
    digits[i] = string.sub(B62, r + 1, r + 1)
  end
  return 'JOB' .. table.concat(digits)
end
