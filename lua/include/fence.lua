-- fence(jk, token): may the holder of `token` act on job row jk?
-- Answers 'ok', 'gone' (no row), 'stale' or 'cancelled'. The token is the
-- attempts count the claim returned; it holds only while the row is active
-- with exactly that count, so a worker whose lease was reaped (and perhaps
-- re-claimed by another) can change nothing. 'cancelled': the token holds
-- but an operator cancelled the job (cancel.lua); the caller drops the job.
local function fence(jk, token)
  local row = redis.call('HMGET', jk, 'state', 'attempts', 'cancel')
  if not row[1] then return 'gone' end
  if row[1] ~= 'active' or row[2] ~= token then return 'stale' end
  if row[3] == '1' then return 'cancelled' end
  return 'ok'
end
