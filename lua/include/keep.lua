--- @include "chunks"
-- Retention: finished jobs leave a bounded trace inside the queue's slot.
--   P..'done'        zset: completed job ids, score = finish time (server ms)
--   P..'done:rows'   hash: id -> JSON {attempts, lane, consumer, enqueued, claimed,
--                    finished} (server ms; '' for no lane / consumer)
-- Dead jobs keep their rows in P..'dead' (score = time of death) as before.
-- Both are trimmed by count and by age whenever they grow, at most
-- TRIM_STEP entries per call, so a call stays bounded and memory flat. The
-- bounds are the queue's meta fields keep_completed, keep_completed_ms,
-- keep_dead, keep_dead_ms, or these defaults (keep_completed 0: keep none).
local KEEP_COMPLETED = 1000
local KEEP_COMPLETED_MS = 86400000
local KEEP_DEAD = 10000
local KEEP_DEAD_MS = 604800000
local TRIM_STEP = 1000

local function keep_bounds(P)
  local m = redis.call('HMGET', P .. 'meta', 'keep_completed', 'keep_completed_ms', 'keep_dead', 'keep_dead_ms')
  return tonumber(m[1] or KEEP_COMPLETED), tonumber(m[2] or KEEP_COMPLETED_MS),
    tonumber(m[3] or KEEP_DEAD), tonumber(m[4] or KEEP_DEAD_MS)
end

-- Oldest first: ids past the count bound, then ids older than the age bound.
local function keep_expired(key, keep, age_ms, now)
  local out = {}
  local over = redis.call('ZCARD', key) - keep
  if over > 0 then out = redis.call('ZRANGE', key, 0, math.min(over, TRIM_STEP) - 1) end
  if #out < TRIM_STEP then
    local old = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. (now - age_ms), 'LIMIT', #out, TRIM_STEP - #out)
    for _, id in ipairs(old) do out[#out + 1] = id end
  end
  return out
end

-- records: a flat list id, json, id, json, ... of jobs completed at `now`.
local function keep_completed(P, records, now)
  local keep, age_ms = keep_bounds(P)
  local done, rows = P .. 'done', P .. 'done:rows'
  if keep > 0 and #records > 0 then
    local scored, score = {}, string.format('%d', now)  -- formatted once, not per record
    for i = 1, #records, 2 do
      scored[#scored + 1] = score
      scored[#scored + 1] = records[i]
    end
    in_chunks('ZADD', done, scored, 1000)
    in_chunks('HSET', rows, records, 1000)
  end
  local gone = keep_expired(done, keep, age_ms, now)
  if #gone > 0 then
    in_chunks('ZREM', done, gone, 1000)
    in_chunks('HDEL', rows, gone, 1000)
  end
end

local function keep_dead(P, now)
  local _, _, keep, age_ms = keep_bounds(P)
  local gone = keep_expired(P .. 'dead', keep, age_ms, now)
  if #gone > 0 then
    local rows = {}
    for i, id in ipairs(gone) do rows[i] = P .. 'job:' .. id end
    in_chunks('ZREM', P .. 'dead', gone, 1000)
    in_chunks('DEL', false, rows, 1000)
  end
end
