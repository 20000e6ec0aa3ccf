-- Rate limits: at most `rate_jobs` claims per window of `rate_ms`, on the
-- server clock, for the whole queue (fields of P..'meta') or for one lane
-- (fields of its meta hash). A window opens at the first claim after the
-- previous one closed (`rate_start`, server ms) and counts its claims
-- (`rate_count`); a new limit (rate.lua) starts a fresh window.
--
-- A lane whose window is full leaves the ring: its meta gets `cooling` = '1'
-- (lane_servable says no, so the ring invariant holds) and P..'cooling'
-- scores it at the time its window reopens. Each claim first puts the lanes
-- whose time has come back (rate_reopen_lanes). P..'meta' field `lane_rates`
-- counts the lanes with a limit, so a queue without any pays nothing more.
--- @include "args"
--- @include "lanes"

-- (jobs, per_ms) of a limit: both positive, or both 0 (clear); EMQARG otherwise.
local function arg_rate(jobs_v, per_v)
  local jobs = arg_int(jobs_v, 'jobs', 0, MAX_COUNT)
  local per = arg_int(per_v, 'per_ms', 0, MAX_MS)
  if (jobs == 0) ~= (per == 0) then arg_fail('jobs', 'jobs and per_ms are both 0 (clear) or both positive') end
  return jobs, per
end

-- A window from its fields at `now`: jobs, start, used, per_ms; nil when no limit.
local function rate_state(jobs, per, start, used, now)
  if not jobs then return nil end
  per, start = tonumber(per), tonumber(start or '0')
  if now >= start + per then return tonumber(jobs), now, 0, per end  -- a fresh window
  return tonumber(jobs), start, tonumber(used or '0'), per
end

local function rate_window(key, now)
  local m = redis.call('HMGET', key, 'rate_jobs', 'rate_ms', 'rate_start', 'rate_count')
  return rate_state(m[1], m[2], m[3], m[4], now)
end

-- Lanes whose window has reopened go back on the ring (if servable).
local function rate_reopen_lanes(P, now)
  local due = redis.call('ZRANGEBYSCORE', P .. 'cooling', '-inf', now, 'LIMIT', 0, 1000)
  for _, lane in ipairs(due) do
    local was = lane_servable(P, lane)
    redis.call('HDEL', lane_meta_key(P, lane), 'cooling')
    redis.call('ZREM', P .. 'cooling', lane)
    lane_settle(P, lane, was)
  end
end

-- The start of a claim of up to n jobs: reopens due lanes and answers the
-- queue's window as a table {budget = how many of n it allows now, wait =
-- ms until it reopens, and what rate_claimed needs}.
local function rate_claim_begin(meta, P, now, n)
  local w = {budget = n, wait = 0}
  local m = redis.call('HMGET', meta, 'lane_rates', 'rate_jobs', 'rate_ms', 'rate_start', 'rate_count')
  if m[1] and tonumber(m[1]) > 0 then
    w.lanes = true
    rate_reopen_lanes(P, now)
  end
  local jobs, start, used, per = rate_state(m[2], m[3], m[4], m[5], now)
  if jobs then
    w.jobs, w.start, w.used = jobs, start, used
    if jobs - used < n then
      w.budget = math.max(0, jobs - used)
      w.wait = start + per - now
    end
  end
  return w
end

-- One job of `lane` was claimed: count it; a full window cools the lane
-- (the caller's lane_servable check then takes it off the ring).
local function rate_lane_claimed(P, w, lane, now)
  if not w.lanes then return end
  local mk = lane_meta_key(P, lane)
  local jobs, start, used, per = rate_window(mk, now)
  if not jobs then return end
  redis.call('HSET', mk, 'rate_start', start, 'rate_count', used + 1)
  if used + 1 >= jobs then
    redis.call('HSET', mk, 'cooling', '1')
    redis.call('ZADD', P .. 'cooling', start + per, lane)
  end
end

-- How many cooling lanes a short claim looks at for one holding a ready job.
local COOLING_LOOK = 100

-- The ms until the first cooling lane that holds a ready job and is not
-- paused reopens (its window is all that keeps that job back; a lane at its
-- active limit counts, as its window, not an ack, puts it back on the ring),
-- or 0 when none does. It looks at the COOLING_LOOK lanes that reopen first;
-- when none of them holds one and more lanes cool, it answers the last one's
-- reopening (one further on may hold one: the consumer looks again then).
local function rate_lane_wait(P, now)
  local first = redis.call('ZRANGE', P .. 'cooling', 0, COOLING_LOOK, 'WITHSCORES')  -- one more: are there more?
  local looked = math.min(#first, 2 * COOLING_LOOK)
  for i = 1, looked, 2 do
    local lane = first[i]
    if redis.call('ZCARD', lane_pending_key(P, lane)) > 0
        and redis.call('HGET', lane_meta_key(P, lane), 'paused') ~= '1' then
      return math.max(1, tonumber(first[i + 1]) - now)
    end
  end
  if #first > looked then return math.max(1, tonumber(first[looked]) - now) end
  return 0
end

-- The end of a claim that took `taken` of `n`: count them in the queue's
-- window, and answer the claim's tail {queue_wait_ms, lane_wait_ms}, or nil
-- when no rate limit keeps a ready job back: queue_wait when the queue's
-- window cut the claim short and a job is still ready (flat, or on a lane
-- on the ring), lane_wait when it came back short while a cooling lane holds
-- a ready job (rate_lane_wait). A window that is full while nothing is ready
-- answers no wait: a drain (or a parked consumer) has nothing to wait for.
local function rate_claim_end(meta, P, w, now, taken, n)
  if w.jobs and taken > 0 then
    redis.call('HSET', meta, 'rate_start', w.start, 'rate_count', w.used + taken)
  end
  if taken >= n then return nil end
  local qwait = 0
  if taken == w.budget and w.budget < n
      and (redis.call('ZCARD', P .. 'pending') > 0 or redis.call('LLEN', P .. 'ring') > 0) then
    qwait = w.wait
  end
  local lwait = w.lanes and rate_lane_wait(P, now) or 0
  if qwait == 0 and lwait == 0 then return nil end
  return {qwait, lwait}
end
