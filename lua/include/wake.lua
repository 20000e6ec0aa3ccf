-- wake(P, n): push up to n wake tokens for consumers parked on BLPOP P..'wake',
-- keeping the list short: a token only means "look again".
local WAKE_MAX = 32
local function wake(P, n)
  if n <= 0 then return end
  if n > WAKE_MAX then n = WAKE_MAX end
  local toks = {}
  for i = 1, n do toks[i] = '1' end
  redis.call('LPUSH', P .. 'wake', unpack(toks))
  redis.call('LTRIM', P .. 'wake', 0, WAKE_MAX - 1)
end
