-- fence(jk, token): may the holder of `token` act on job row jk?
-- Answers 'ok', 'gone' (no row), 'stale' or 'cancelled'. The token is the
-- attempts count the claim returned; it holds only while the row is active
-- with exactly that count, so a worker whose lease was reaped (and perhaps
-- re-claimed by another) can change nothing. 'cancelled': the token holds
-- but an operator cancelled the job (cancel.lua); the caller drops the job.
--- @include "now"
--- @include "replies"
--- @include "cancel"
local function fence(jk, token)
  local row = redis.call('HMGET', jk, 'state', 'attempts', 'cancel')
  if not row[1] then return 'gone' end
  if row[1] ~= 'active' or row[2] ~= token then return 'stale' end
  if row[3] == '1' then return 'cancelled' end
  return 'ok'
end

-- fence_open(P, id): the opening of a fenced transition that acts on the
-- row itself (extend, retry, release), after arg_fenced: KEYS[1] the job
-- row, ARGV[3] the token. Answers the reply to return at once -- GONE, the
-- stale error, or the cancelled error once the cancelled job is dropped --
-- or nil and the server time (ms) the transition goes on with:
--   local done, now = fence_open(P, id)
--   if done then return done end
local function fence_open(P, id)
  local verdict = fence(KEYS[1], ARGV[3])
  if verdict == 'gone' then return GONE end
  if verdict == 'stale' then return stale_reply(id, ARGV[3]) end
  local now = now_ms()
  if verdict == 'cancelled' then
    drop_cancelled(P, id, KEYS[1], now)
    return cancelled_reply(id)
  end
  return nil, now
end
