-- Waiting for a job's end without polling (Queue.wait, lua/wait.lua).
-- A caller registers on the job's row (field 'wait': how many callers wait;
-- 'wait_seq': the number of this life's list) in the same script that
-- checks the job has not ended, then blocks on BLPOP P..'notify:<id>:<n>'.
-- The script that ends the job pushes its final state there once per
-- waiter and lets the list expire, so no end goes unheard and nobody polls
-- the row; the next life's callers get another list (wait.lua).
local WAITERS_MAX = 1000   -- pushes per end, however many registered
local NOTIFY_MS = 60000    -- an unread notification expires after this

-- notify_waiters(P, id, jk, state, n): job `id` (row jk) ended in `state`;
-- n is its row's 'wait' field (nil or '0': nobody waits, nothing to do).
local function notify_waiters(P, id, jk, state, n)
  n = tonumber(n) or 0
  if n <= 0 then return end
  if n > WAITERS_MAX then n = WAITERS_MAX end
  local key = P .. 'notify:' .. id
  local seq = redis.call('HGET', jk, 'wait_seq')
  if seq then key = key .. ':' .. seq end  -- none: registered by an older wait.lua, which blocks on the bare key
  local vals = {}
  for i = 1, n do vals[i] = state end
  redis.call('LPUSH', key, unpack(vals))
  redis.call('PEXPIRE', key, NOTIFY_MS)
  redis.call('HDEL', jk, 'wait', 'wait_seq')  -- a dead row stays; its waiters have been told
end
