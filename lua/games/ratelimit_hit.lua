--[[ ratelimit_hit: count one request against a fixed-window rate limit (games/ratelimit.py),
or, given a session's keys, only while that session is signed in.

The counter lives for its window plus a second, so the key of the next
window starts again from one.

KEYS[1] counter          cm:rl:<limit>:<ident digest>:<window number>
KEYS[2] session          optional: the session's cache entry  {cm:cache}:1:django.contrib.sessions.cached_db<key>
KEYS[3] identity         with KEYS[2]: the session's identity {cm:cache}:1:cm.identity:<key>
ARGV[1] ttl_ms           how long the counter lives (the window plus a second)

A hit that rides with the session's own read (games/rides.py) is sent
before anyone knows whether the session is still good, so it names the
session's two keys: the entry is deleted when the session ends (log-out,
flush, expiry) and the identity whenever its user changes (a new password,
a deactivation), and with either gone nothing is counted -- a dead session
key cannot charge its former owner's limit. (Rides never go out on a
cluster, where these keys would live on other nodes.)

Replies: the count of hits in the window, this one included; 0 when the
         session's entry or identity is gone (nothing counted: the view
         counts its own hit once Django has checked the session).
Errors:  EMQARG for a bad argument (nothing changed).
]]
local ttl = ARGV[1]
if (#KEYS ~= 1 and #KEYS ~= 3) or #ARGV ~= 1 or string.sub(KEYS[1], 1, 6) ~= 'cm:rl:' then
  return redis.error_reply('EMQARG rate limit: want KEYS[1] cm:rl:<limit>:<ident>:<window> '
    .. '(and a session\'s entry and identity, or neither) and ARGV[1] ttl ms')
end
if not string.find(ttl, '^[1-9]%d*$') or #ttl > 15 then
  return redis.error_reply('EMQARG rate limit: ARGV[1] (ttl ms) must be a positive integer')
end
if #KEYS == 3 and redis.call('EXISTS', KEYS[2], KEYS[3]) < 2 then return 0 end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ttl) end
return n
