--[[ live_snapshot: what the round page's live panel shows, in one read (games/live.py).

Read-only. A sealed blind round's board is never read: the caller asks for
the counts only ('0'), and then no member or score leaves the server.

KEYS[1] board            cm:lb:<RND>
KEYS[2] recent activity  {cm:lb:<RND>}:act  (the board's slot)
ARGV[1] player           the asking player's PLR id
ARGV[2] since            activity since (ms)
ARGV[3] top              the top's length, 1 to 100
ARGV[4] around           neighbours either side of the player, 0 to 100
ARGV[5] board            '1' to read the board, '0' for the counts only

Replies: {players, recent, my 0-based rank or -1, {member, score, ...} of the
         top, first 0-based rank of my neighbours or -1, {member, score, ...} of them}
Errors:  EMQARG for a bad argument.
]]
local since, top, around = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if #KEYS ~= 2 or #ARGV ~= 5 or string.sub(KEYS[1], 1, 6) ~= 'cm:lb:' or KEYS[2] ~= '{' .. KEYS[1] .. '}:act'
    or ARGV[1] == '' or not since or not top or not around or top < 1 or around < 0 or top > 100 or around > 100
    or top % 1 ~= 0 or around % 1 ~= 0 or (ARGV[5] ~= '0' and ARGV[5] ~= '1') then
  return redis.error_reply('EMQARG live snapshot: bad arguments')
end
local players = redis.call('ZCARD', KEYS[1])
local recent = redis.call('ZCOUNT', KEYS[2], since, '+inf')
if ARGV[5] == '0' then return {players, recent, -1, {}, -1, {}} end
local rank = redis.call('ZREVRANK', KEYS[1], ARGV[1])
local head = redis.call('ZREVRANGE', KEYS[1], 0, top - 1, 'WITHSCORES')
if not rank then return {players, recent, -1, head, -1, {}} end
if rank < top then return {players, recent, rank, head, -1, {}} end
local start = math.max(rank - around, top)
return {players, recent, rank, head, start, redis.call('ZREVRANGE', KEYS[1], start, rank + around, 'WITHSCORES')}
