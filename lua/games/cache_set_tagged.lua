--[[ cache_set_tagged: cache one entry, file its key under a tag, and let it live
no longer than the entry it was made from (codemojex_site/cache.py).

KEYS[1] key      the entry                     {cm:cache}:1:cm.identity:<session key>
KEYS[2] tag      a set of the full names of the keys filed under it
KEYS[3] source   optional: the entry this one is made from (a session's);
                 the new entry's life is capped at what the source has left
ARGV[1] value    the serialized value
ARGV[2] ttl_ms   the longest the entry may live, ms (1 .. one year)

Every key here shares the cache prefix's hash tag, so one slot holds them
all (a cluster runs the script where that slot lives).

Replies: the life given to the entry, ms; 0 when the source is gone or has
         no time left (nothing written: an entry must not outlive what it
         copies). The tag's own life is kept a minute past its
         longest-lived key's.
Errors:  EMQARG for a bad argument (nothing written).
]]
local ttl = ARGV[2]
if (#KEYS ~= 2 and #KEYS ~= 3) or #ARGV ~= 2 or type(ttl) ~= 'string'
    or not string.find(ttl, '^[1-9]%d*$') or #ttl > 11 or tonumber(ttl) > 31536000000 then
  return redis.error_reply('EMQARG set_tagged: want KEYS key, tag [, source] and ARGV value, ttl ms (1 .. one year)')
end
ttl = tonumber(ttl)

if KEYS[3] then
  local left = redis.call('PTTL', KEYS[3])
  if left == -2 or left == 0 then return 0 end    -- gone (or going): cache nothing
  if left > 0 and left < ttl then ttl = left end  -- -1: the source never expires, the ttl stands
end

redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('SADD', KEYS[2], KEYS[1])
local tag_ttl = ttl + 60000
if redis.call('PTTL', KEYS[2]) < tag_ttl then redis.call('PEXPIRE', KEYS[2], tag_ttl) end
return ttl
