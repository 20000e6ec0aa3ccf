-- count(P, field, now, n): add n to a queue counter ('completed', 'dead') in
-- P..'meta' and in the per-minute bucket P..'minute:<unix minute>', which
-- expires after two hours (the dashboard charts the last hour).
local function count(P, field, now, n)
  redis.call('HINCRBY', P .. 'meta', field, n)
  local bucket = P .. 'minute:' .. math.floor(now / 60000)
  if redis.call('HINCRBY', bucket, field, n) == n then
    redis.call('EXPIRE', bucket, 7200)
  end
end
