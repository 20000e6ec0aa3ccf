-- Unique jobs. enqueue with a unique key K takes P..'unique:'..K (a string
-- holding the JOB id, PEXPIREd at unique_ttl_ms when one is given) and
-- records K on the row (field `unique`, and the TTL in `unique_ttl`). While
-- the holder's row exists, an enqueue with K answers the holder's id and
-- writes nothing. Every terminal transition (complete, dead-letter, remove,
-- cancel) releases the key, but only if it still names that job: after the
-- TTL another job may hold it. requeue.lua takes it again for a dead job it
-- requeues, with the same TTL, or refuses when another live job holds it.
--- @include "args"
local MAX_UNIQUE = 200          -- a unique key, in bytes

-- '' (none) or 1..MAX_UNIQUE of [A-Za-z0-9._:@/+=-]; EMQARG otherwise.
local function arg_unique(v)
  if v == '' then return v end
  if type(v) ~= 'string' or #v > MAX_UNIQUE or not string.find(v, '^[%w%._:@/%+=%-]+$') then
    arg_fail('unique_key', 'want 1 to ' .. MAX_UNIQUE .. ' of [A-Za-z0-9._:@/+=-], got "'
      .. string.sub(tostring(v), 1, 40) .. '"')
  end
  return v
end

local function unique_key(P, key) return P .. 'unique:' .. key end

-- The id of the live job holding `key`, or nil when the key is free (or
-- names a job whose row is gone, so it is free too).
local function unique_holder(P, key)
  local holder = redis.call('GET', unique_key(P, key))
  if holder and redis.call('EXISTS', P .. 'job:' .. holder) == 1 then return holder end
  return nil
end

local function unique_take(P, key, id, ttl)
  if ttl > 0 then
    redis.call('SET', unique_key(P, key), id, 'PX', ttl)
  else
    redis.call('SET', unique_key(P, key), id)
  end
end

-- Release `key` (a row's `unique` field, or nil) if job `id` still holds it.
local function unique_release(P, id, key)
  if not key or key == '' then return end
  local uk = unique_key(P, key)
  if redis.call('GET', uk) == id then redis.call('DEL', uk) end
end

-- The same, reading the key from the row jk first (paths off the hot one).
local function unique_release_row(P, id, jk)
  unique_release(P, id, redis.call('HGET', jk, 'unique'))
end
