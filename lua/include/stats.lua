-- count(P, field, now): add one to a queue counter ('completed', 'dead') in
-- P..'meta' and in the per-minute bucket P..'minute:<unix minute>', which
-- expires after two hours (the dashboard charts the last hour).
local function count(P, field, now)
  redis.call('HINCRBY', P .. 'meta', field, 1)
  local bucket = P .. 'minute:' .. math.floor(now / 60000)
  if redis.call('HINCRBY', bucket, field, 1) == 1 then
    redis.call('EXPIRE', bucket, 7200)
  end
end
