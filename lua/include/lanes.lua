-- Lane bookkeeping, shared by every script that moves a laned job.
--
-- A lane L of the queue with prefix P owns two keys:
--   P..'g:'..L..':pending'  zset of ready job ids, score -priority (priority.lua), then mint order
--   P..'g:'..L..':meta'     hash: paused ('1'), limit (max active), active;
--                           rate_* and cooling ('1') for a rate limit (rate.lua)
-- and two queue keys track lanes as a whole:
--   P..'ring'               list of lanes that can be served now, each once
--   P..'lanes'              set of lanes that have jobs or settings
--
-- Invariant: L is on the ring exactly when lane_servable(P, L). A script reads
-- lane_servable before it changes a lane and calls lane_settle after, which
-- puts the lane on the ring or takes it off as the answer changed.

local function lane_pending_key(P, lane) return P .. 'g:' .. lane .. ':pending' end
local function lane_meta_key(P, lane) return P .. 'g:' .. lane .. ':meta' end

local function lane_servable(P, lane)
  if redis.call('ZCARD', lane_pending_key(P, lane)) == 0 then return false end
  local m = redis.call('HMGET', lane_meta_key(P, lane), 'paused', 'limit', 'active', 'cooling')
  if m[1] == '1' or m[4] == '1' then return false end
  if m[2] and tonumber(m[3] or '0') >= tonumber(m[2]) then return false end
  return true
end

local function lane_settle(P, lane, was_servable)
  local now_servable = lane_servable(P, lane)
  if now_servable and not was_servable then
    redis.call('RPUSH', P .. 'ring', lane)
  elseif was_servable and not now_servable then
    redis.call('LREM', P .. 'ring', 1, lane)
  end
  if not now_servable and redis.call('ZCARD', lane_pending_key(P, lane)) == 0 then
    -- Forget a lane that holds nothing: no ready jobs, none active, no settings.
    local mk = lane_meta_key(P, lane)
    local m = redis.call('HMGET', mk, 'paused', 'limit', 'active', 'rate_jobs')
    if not m[1] and not m[2] and tonumber(m[3] or '0') <= 0 and not m[4] then
      redis.call('DEL', mk)
      redis.call('SREM', P .. 'lanes', lane)
    end
  end
  return now_servable
end

-- One job of the lane left the active state (completed, retried, reaped, ...):
-- lane_servable, the decrement and lane_settle, in fewer calls. A release
-- changes only the active count, so servable before and after are worked out
-- from one read of the meta (none when the counter is its only field: no
-- setting); the ready count is read only when an answer can turn on it (the
-- lane may come back on the ring, or be forgotten).
local function lane_release_active(P, lane)
  local mk = lane_meta_key(P, lane)
  local active = redis.call('HINCRBY', mk, 'active', -1)
  local paused, limit, cooling, rated = false, false, false, false
  if redis.call('HLEN', mk) > 1 then
    local m = redis.call('HMGET', mk, 'paused', 'limit', 'cooling', 'rate_jobs')
    paused, limit, cooling, rated = m[1], m[2] and tonumber(m[2]), m[3], m[4]
  end
  local open = paused ~= '1' and cooling ~= '1'
  local was_ok = open and not (limit and active + 1 >= limit)
  local now_ok = open and not (limit and active >= limit)
  local forgettable = not paused and not limit and active <= 0 and not rated
  if was_ok == now_ok and not forgettable then return end
  if redis.call('ZCARD', lane_pending_key(P, lane)) > 0 then
    if now_ok and not was_ok then
      redis.call('RPUSH', P .. 'ring', lane)
    elseif was_ok and not now_ok then
      redis.call('LREM', P .. 'ring', 1, lane)
    end
  elseif forgettable then
    -- Forget a lane that holds nothing: no ready jobs, none active, no settings (as lane_settle).
    redis.call('DEL', mk)
    redis.call('SREM', P .. 'lanes', lane)
  end
end
