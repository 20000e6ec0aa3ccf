--[[ pause: stop or restart claims for the whole queue.

KEYS[1] meta             emq:{q}:meta
ARGV[1] P                emq:{q}:
ARGV[2] '1' to pause, '0' to resume

Reply: 1. Resuming pushes wake tokens so parked consumers look again.
]]
--- @include "wake"

if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'paused', '1')
else
  redis.call('HDEL', KEYS[1], 'paused')
  wake(ARGV[1], 32)
end
return 1
