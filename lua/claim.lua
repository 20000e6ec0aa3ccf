--[[ claim: lease up to n ready jobs.

Flat pending jobs are served first (ZPOPMIN: oldest mint). Then lanes: each
pick rotates the ring one step (LMOVE ring ring LEFT RIGHT) and pops the head
of that lane, so lanes are served in turn and a deep lane cannot starve a
shallow one. Each claimed row gets HINCRBY attempts 1 (the fencing token),
state active, and a lease in the active set at server TIME + lease_ms.

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
flat). Empty when nothing is ready or the queue is paused. When a rate limit
(rate.lua) kept jobs back from a claim that came back short, one more entry
follows the jobs: {queue_wait_ms, lane_wait_ms}, the ms until the queue's
window reopens (0: it did not cut this claim; nothing can be claimed before
then) and until the first cooling lane reopens (0: none cools). A queue
without rate limits never answers it.

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

local function lease_job(id, lane)
  local jk = P .. 'job:' .. id
  local token = redis.call('HINCRBY', jk, 'attempts', 1)
  redis.call('HSET', jk, 'state', 'active', 'claimed', now, 'consumer', consumer)
  events_add(events, id, lane, token)
  leases[#leases + 1] = deadline
  leases[#leases + 1] = id
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', jk, 'payload')
  out[#out + 1] = token
  out[#out + 1] = lane
end

local flat = budget > 0 and redis.call('ZPOPMIN', KEYS[1], budget) or {}
for i = 1, #flat, 2 do lease_job(flat[i], '') end

local taken = #flat / 2
-- Every lane on the ring is servable (see lanes.lua), so each step claims one
-- job; the bound only guards against a ring that lost its invariant.
local guard = redis.call('LLEN', KEYS[3])
while taken < budget and guard > 0 do
  local lane = redis.call('LMOVE', KEYS[3], KEYS[3], 'LEFT', 'RIGHT')
  if not lane then break end
  local popped = redis.call('ZPOPMIN', lane_pending_key(P, lane))
  if #popped == 0 then
    redis.call('RPOP', KEYS[3])  -- the lane we just rotated to the tail
    guard = guard - 1
  else
    lease_job(popped[1], lane)
    redis.call('HINCRBY', lane_meta_key(P, lane), 'active', 1)
    rate_lane_claimed(P, rate, lane, now)
    if not lane_servable(P, lane) then
      redis.call('RPOP', KEYS[3])  -- drained or at its limit: off the ring
    end
    taken = taken + 1
    guard = redis.call('LLEN', KEYS[3])
  end
end
-- One ZADD for the whole batch: every lease ends at the same deadline. A
-- batch goes into a skiplist (see skiplist.lua).
zadd_many(KEYS[2], leases)
if taken < n then redis.call('DEL', P .. 'wake') end  -- every token left is stale (see above)
emit_batch(P, 'claimed', events, claimed)
out[#out + 1] = rate_claim_end(KEYS[4], P, rate, now, taken, n)
return out
