-- zadd_many(key, items): ZADD the (score, member) pairs in `items`, keeping
-- a sorted set that gets batches as a skiplist.
--
-- A sorted set of up to zset-max-listpack-entries members (128 by default)
-- is a listpack: one flat buffer, which each inserted member scans twice
-- (for the member, then for its place) and grows, so k members into a set
-- of m cost O(k*m). A queue's active set gets a claim's leases at its tail
-- in one ZADD; a shard of a sharded queue keeps 30-130 leases, a listpack,
-- where ZADD cost 3x what it costs in a skiplist (measured, docs/scaling.md).
-- So a batch of at least ZBATCH members goes into a skiplist: when the set
-- is not one yet, the batch carries one member longer than
-- zset-max-listpack-value (64 by default), which makes the server create or
-- convert it as a skiplist before the other members go in, and that member
-- is removed at once. (A skiplist stays one when it shrinks; it is a
-- listpack again only when recreated or reloaded, and the next batch
-- converts it again.) Nothing else changes: the same members, the same
-- scores, in one script.
--- @include "chunks"

local ZBATCH = 16
-- Never a member of ours (ids are 14 bytes): 100 bytes.
local ZMARK = '~skiplist~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~'

local function zadd_many(key, items)
  if #items < 2 * ZBATCH or redis.call('OBJECT', 'ENCODING', key) == 'skiplist' then
    in_chunks('ZADD', key, items, 1000)
    return
  end
  local marked = {0, ZMARK}
  for i = 1, #items do marked[i + 2] = items[i] end
  in_chunks('ZADD', key, marked, 1000)
  redis.call('ZREM', key, ZMARK)
end
