-- Lane bookkeeping, shared by every script that moves a laned job.
--
-- A lane L of the queue with prefix P owns two keys:
--   P..'g:'..L..':pending'  zset of ready job ids, score -priority (priority.lua), then mint order
--   P..'g:'..L..':meta'     hash: paused ('1'), limit (max active) and, only while
--                           limit is set, active; rate_* and cooling ('1') for a
--                           rate limit (rate.lua)
-- and two queue keys track lanes as a whole:
--   P..'ring'               list of lanes that can be served now, each once
--   P..'lanes'              set of lanes that have ready jobs or settings
--
-- Invariant: L is on the ring exactly when lane_servable(P, L). A script reads
-- lane_servable before it changes a lane and calls lane_settle after, which
-- puts the lane on the ring or takes it off as the answer changed.
--
-- Active jobs are counted only where a limit needs the count: while L has a
-- limit, its active field is the number of L's leased jobs (lane.lua counts
-- them when the limit is set; claim adds, lane_release_active takes away),
-- and each of those jobs' rows holds counted = '1' (the claim under a limit,
-- or the count at lane.lua, wrote it). A lane without a limit keeps no count,
-- so a job of it costs no lane call when claimed and none when it ends (its
-- row is not counted, and a row is read anyway), and the lane is forgotten
-- as soon as it holds no ready job and no setting, even while jobs of it are
-- leased. A row's counted may outlive its lane's limit; it then costs one
-- read of the meta, which finds no limit.

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
    -- Forget a lane that holds nothing: no ready jobs, no settings.
    local mk = lane_meta_key(P, lane)
    local m = redis.call('HMGET', mk, 'paused', 'limit', 'rate_jobs')
    if not m[1] and not m[2] and not m[3] then
      redis.call('DEL', mk)
      redis.call('SREM', P .. 'lanes', lane)
    end
  end
  return now_servable
end

-- One job of the lane left the active state (completed, retried, reaped, ...);
-- counted is its row's counted field. Only a lane with a limit counts its
-- active jobs (see above), and every job it counts is marked, so an unmarked
-- job needs no lane call at all. For a counted lane the decrement can only
-- bring it back under its limit, so the one change to the ring is that it
-- may rejoin (when it is open and holds a ready job).
local function lane_release_active(P, lane, counted)
  if counted ~= '1' or not lane or lane == '' then return end
  local mk = lane_meta_key(P, lane)
  local m = redis.call('HMGET', mk, 'limit', 'paused', 'cooling')
  if not m[1] then return end
  local limit = tonumber(m[1])
  local active = redis.call('HINCRBY', mk, 'active', -1)
  if m[2] ~= '1' and m[3] ~= '1' and active + 1 >= limit and active < limit
      and redis.call('ZCARD', lane_pending_key(P, lane)) > 0 then
    redis.call('RPUSH', P .. 'ring', lane)
  end
end

-- Set, change or clear the lane's limit (0: none). Setting one counts the
-- lane's active jobs afresh, found in the queue's active set (one pass over
-- it, O(leased jobs)), and marks their rows: the count is then exact however
-- it stood before (a count left by a version that counted every lane, or by
-- such a worker running beside this one, included). Clearing the limit drops
-- the count.
local function lane_set_limit(P, lane, limit)
  local mk = lane_meta_key(P, lane)
  if limit == 0 then
    redis.call('HDEL', mk, 'limit', 'active')
    return
  end
  local active, from = 0, 0
  while true do
    local ids = redis.call('ZRANGE', P .. 'active', from, from + 999)
    for _, id in ipairs(ids) do
      local jk = P .. 'job:' .. id
      if redis.call('HGET', jk, 'lane') == lane then
        active = active + 1
        redis.call('HSET', jk, 'counted', '1')
      end
    end
    if #ids < 1000 then break end
    from = from + 1000
  end
  redis.call('HSET', mk, 'limit', limit, 'active', active)
end
