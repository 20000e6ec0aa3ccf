-- now_ms(): the server clock in milliseconds. Leases and schedules are always
-- measured on this clock, never on a caller's.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
