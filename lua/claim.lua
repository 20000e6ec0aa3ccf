--[[ claim: lease up to n ready jobs.

Flat pending jobs are served first (ZPOPMIN: oldest mint). Then lanes: each
pick rotates the ring one step (as LMOVE ring ring LEFT RIGHT) and pops the
head of that lane, so lanes are served in turn and a deep lane cannot starve
a shallow one (the picks are worked out per lane first and done with one
ZPOPMIN per lane and one rewrite of the ring's head and tail, see below).
Each claimed row gets attempts + 1 (the fencing token), state active, and a
lease in the active set at server TIME + lease_ms. A lane with a limit counts
the jobs taken; a lane with no setting that gives its last ready job is
forgotten (lanes.lua).

KEYS[1] flat pending     emq:{q}:pending
KEYS[2] active           emq:{q}:active
KEYS[3] ring             emq:{q}:ring
KEYS[4] meta             emq:{q}:meta
ARGV[1] P                emq:{q}:
ARGV[2] lease_ms
ARGV[3] n                how many jobs at most
ARGV[4] consumer         the claiming consumer's CSR id, or '' (kept on the row
                         with the claim time, for the completed-job record)

Reply: a flat array, four entries per job: id, payload, token, lane ('' if
flat). Empty when nothing is ready or the queue is paused. When a claim
came back short while a rate limit (rate.lua) keeps a ready job back, one
more entry follows the jobs: {queue_wait_ms, lane_wait_ms}, the ms until
the queue's window reopens (0: it did not cut this claim, or no job is left
ready, flat or on the ring; else nothing can be claimed before then) and
until the first cooling lane that holds a ready job and is not paused
reopens (0: none). A full window with nothing ready behind it answers no
wait, so a consumer that drains returns at once. A queue without rate
limits never answers it.

A claim that takes fewer than n leaves nothing ready, so it empties the wake
list (P..'wake'): a token left there would only wake a consumer to claim
nothing. Tokens are pushed for work made ready later, so none is lost.
Errors: EMQARG for a bad argument (nothing changed).
Event: one claimed entry for all the jobs leased (data {"lease_deadline", "consumer"}).
]]
--- @include "args"
--- @include "now"
--- @include "lanes"
--- @include "chunks"
--- @include "skiplist"
--- @include "events"
--- @include "rate"

arg_count(4)
local P = arg_prefix(ARGV[1])
local lease = arg_int(ARGV[2], 'lease_ms', 1, MAX_MS)
local n = arg_int(ARGV[3], 'n', 1, MAX_BATCH)
local consumer = ARGV[4]
if consumer ~= '' then arg_id(consumer, 'consumer') end
arg_key(1, P .. 'pending')
arg_key(2, P .. 'active')
arg_key(3, P .. 'ring')
arg_key(4, P .. 'meta')
if redis.call('HGET', KEYS[4], 'paused') == '1' then return {} end

local now = now_ms()
local deadline = now + lease
local out, leases = {}, {}
local events = events_batch(P)
local claimed = '{"lease_deadline":' .. deadline .. (consumer ~= '' and (',"consumer":"' .. consumer .. '"') or '') .. '}'
local rate = rate_claim_begin(KEYS[4], P, now, n)
local budget = rate.budget

local now_s, deadline_s = string.format('%d', now), string.format('%d', deadline)  -- formatted once, not per job
local function lease_job(id, lane, counted)  -- counted: the lane has a limit (lanes.lua)
  local jk = P .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'attempts', 'payload')
  local a, token = row[1], 1
  if a and #a <= 14 and string.find(a, '^%d+$') and (#a == 1 or string.byte(a) ~= 48) then
    token = tonumber(a) + 1  -- as HINCRBY would count (a canonical decimal of 14 digits at most)
  elseif a then  -- not a short decimal (these scripts never write one): let the server count
    token = redis.call('HINCRBY', jk, 'attempts', 1)
    redis.call('HSET', jk, 'state', 'active', 'claimed', now_s, 'consumer', consumer)
    a = false
  end
  if a ~= false and counted then  -- the new token in the same HSET as the rest
    redis.call('HSET', jk, 'attempts', token, 'state', 'active', 'claimed', now_s,
      'consumer', consumer, 'counted', '1')
  elseif a ~= false then
    redis.call('HSET', jk, 'attempts', token, 'state', 'active', 'claimed', now_s,
      'consumer', consumer)
  elseif counted then
    redis.call('HSET', jk, 'counted', '1')
  end
  events_add(events, id, lane, token)
  leases[#leases + 1] = deadline_s
  leases[#leases + 1] = id
  out[#out + 1] = id
  out[#out + 1] = row[2]
  out[#out + 1] = token
  out[#out + 1] = lane
end

local flat = budget > 0 and redis.call('ZPOPMIN', KEYS[1], budget) or {}
for i = 1, #flat, 2 do lease_job(flat[i], '') end

local taken = #flat / 2
-- Lanes, in turn. The turns are worked out here first, on what each lane
-- holds (its ready count and meta, read once per lane), exactly as one
-- LMOVE and one ZPOPMIN per job would take them; then each lane gives its
-- jobs in one ZPOPMIN, and the ring is rewritten once. A lane that is
-- drained, paused, cooling or at its limit after a job leaves the ring, as
-- a lane with no ready job does when its turn comes (every lane on the ring
-- is servable, see lanes.lua, so that only guards a ring that lost its
-- invariant).
local ring_len = taken < budget and redis.call('LLEN', KEYS[3]) or 0
if ring_len > 0 then
  local state, order, steps = {}, {}, {}
  local front, head, read = {}, 1, 0  -- ring entries read so far; the next to visit is front[head]
  local back, wrapped = {}, false     -- lanes that stay on, in their new order; back came round
  while taken < budget do
    local lane
    if head <= #front then
      lane = front[head]
      head = head + 1
    elseif read < ring_len then
      front = redis.call('LRANGE', KEYS[3], read, read + math.min(ring_len - read, budget - taken) - 1)
      head, read = 1, read + #front
      if #front == 0 then break end
    elseif #back > 0 then
      front, head, back, wrapped = back, 1, {}, true
    else
      break
    end
    if lane then
      -- s: {ready left, jobs taken, active, limit or false, paused or cooling, then the lane's rate
      -- window (as rate_lane_claimed): jobs, start, used, per_ms, and whether this claim fills it;
      -- then the ZPOPMIN reply and the next of its ids to lease; its ready set's key and its meta's;
      -- whether it has no setting (forgotten once drained), whether its meta holds a field anyway}
      local s = state[lane]
      if not s then
        local pk = lane_pending_key(P, lane)
        local left = redis.call('ZCARD', pk)
        if left > 0 then
          local mk = lane_meta_key(P, lane)
          local m = redis.call('HMGET', mk, 'paused', 'limit', 'active', 'cooling', 'rate_jobs')
          s = {left, 0, tonumber(m[3] or '0'), m[2] and tonumber(m[2]) or false, m[1] == '1' or m[4] == '1',
            false, 0, 0, 0, false, false, 1, pk, mk, not (m[1] or m[2] or m[5]), (m[3] or m[4]) and true}
          if rate.lanes then
            local jobs, start, used, per = rate_window(mk, now)
            if jobs then s[6], s[7], s[8], s[9] = jobs, start, used, per end
          end
        else
          s = {0, 0}
        end
        state[lane] = s
        order[#order + 1] = lane
      end
      if s[1] > 0 then
        s[1], s[2], s[3], taken = s[1] - 1, s[2] + 1, s[3] + 1, taken + 1
        steps[#steps + 1] = lane
        if s[6] then
          s[8] = s[8] + 1
          if s[8] >= s[6] then s[5], s[10] = true, true end  -- the window is full: the lane cools
        end
        if s[1] > 0 and not s[5] and not (s[4] and s[3] >= s[4]) then back[#back + 1] = lane end
      end
    end
  end
  -- The ring: the lanes visited leave its head; those that stay go to its tail.
  local rest = {}
  for i = head, #front do rest[#rest + 1] = front[i] end
  if wrapped then
    redis.call('DEL', KEYS[3])
    for _, lane in ipairs(back) do rest[#rest + 1] = lane end
    in_chunks('RPUSH', KEYS[3], rest, 1000)
  else
    if read - #rest > 0 then redis.call('LPOP', KEYS[3], read - #rest) end
    in_chunks('RPUSH', KEYS[3], back, 1000)
  end
  for _, lane in ipairs(order) do
    local s = state[lane]
    if s[2] > 0 then
      local mk = s[14]
      s[11], s[12] = redis.call('ZPOPMIN', s[13], s[2]), 1
      if s[4] then redis.call('HINCRBY', mk, 'active', s[2]) end  -- only a limited lane counts (lanes.lua)
      if s[1] == 0 and s[15] then  -- drained, no setting: forget it (its leased jobs need no lane key)
        redis.call('SREM', P .. 'lanes', lane)
        if s[16] then redis.call('DEL', mk) end
      end
      if s[6] then
        redis.call('HSET', mk, 'rate_start', s[7], 'rate_count', s[8])
        if s[10] then
          redis.call('HSET', mk, 'cooling', '1')
          redis.call('ZADD', P .. 'cooling', s[7] + s[9], lane)
        end
      end
    end
  end
  for _, lane in ipairs(steps) do
    local s = state[lane]
    lease_job(s[11][s[12]], lane, s[4])
    s[12] = s[12] + 2
  end
end
-- One ZADD for the whole batch: every lease ends at the same deadline. A
-- batch goes into a skiplist (see skiplist.lua).
zadd_many(KEYS[2], leases)
if taken < n then redis.call('DEL', P .. 'wake') end  -- every token left is stale (see above)
emit_batch(P, 'claimed', events, claimed)
out[#out + 1] = rate_claim_end(KEYS[4], P, rate, now, taken, n)
return out
