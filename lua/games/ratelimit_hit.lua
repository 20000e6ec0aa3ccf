--[[ ratelimit_hit: count one request against a fixed-window rate limit (games/ratelimit.py).

The counter lives for its window plus a second, so the key of the next
window starts again from one.

KEYS[1] counter          cm:rl:<limit>:<ident digest>:<window number>
ARGV[1] ttl_ms           how long the counter lives (the window plus a second)

Replies: the count of hits in the window, this one included.
Errors:  EMQARG for a bad argument (nothing changed).
]]
local ttl = ARGV[1]
if #KEYS ~= 1 or #ARGV ~= 1 or string.sub(KEYS[1], 1, 6) ~= 'cm:rl:' then
  return redis.error_reply('EMQARG rate limit: want KEYS[1] cm:rl:<limit>:<ident>:<window> and ARGV[1] ttl ms')
end
if not string.find(ttl, '^[1-9]%d*$') or #ttl > 15 then
  return redis.error_reply('EMQARG rate limit: ARGV[1] (ttl ms) must be a positive integer')
end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ttl) end
return n
