-- The replies every fenced script shares, so a client reads one answer one
-- way whichever transition it called:
--   GONE                 0: no row (completed, removed or cancelled before)
--   stale_reply          EMQSTALE: the token no longer holds the lease
--   cancelled_reply      EMQCANCELLED: the job was cancelled while leased;
--                        the script has just dropped it (see cancel.lua)
local GONE = 0
local function stale_reply(id, token)
  return redis.error_reply('EMQSTALE token ' .. token .. ' does not hold ' .. id)
end
local function cancelled_reply(id)
  return redis.error_reply('EMQCANCELLED job ' .. id .. ' was cancelled')
end
