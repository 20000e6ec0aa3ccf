--[[ cache_delete_tagged: delete every key filed under a tag, and the tag, at once
(codemojex_site/cache.py).

KEYS[1] tag      a set of the full names of the keys filed under it
ARGV[1]          none: the script takes no arguments

One script, so nothing is filed under the tag between reading its members
and deleting them: a key filed just before is deleted, one filed just after
is filed under a new tag, where the next call finds it. The members share
the tag's slot (the cache prefix's hash tag), as a cluster requires.

Replies: how many of the filed keys were there, and are deleted now.
Errors:  EMQARG for a bad argument (nothing deleted).
]]
if #KEYS ~= 1 or #ARGV ~= 0 then
  return redis.error_reply('EMQARG delete_tagged: want KEYS tag and no ARGV')
end

local members = redis.call('SMEMBERS', KEYS[1])
local deleted = 0
for i = 1, #members, 1000 do  -- unpack() spreads a limited number of values at once
  deleted = deleted + redis.call('DEL', unpack(members, i, math.min(i + 999, #members)))
end
redis.call('DEL', KEYS[1])
return deleted
