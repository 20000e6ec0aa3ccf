--[[ pause: stop or restart claims for the whole queue.

KEYS[1] meta             emq:{q}:meta
ARGV[1] P                emq:{q}:
ARGV[2] paused           '1' to pause, '0' to resume

Reply: 1. Resuming pushes WAKE_MAX wake tokens so every parked consumer
looks again.
Errors: EMQARG for a bad argument (nothing changed).
]]
--- @include "args"
--- @include "wake"

arg_count(2)
local P = arg_prefix(ARGV[1])
if ARGV[2] ~= '1' and ARGV[2] ~= '0' then arg_fail('paused', "want '1' or '0'") end
arg_key(1, P .. 'meta')

if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], 'paused', '1')
else
  redis.call('HDEL', KEYS[1], 'paused')
  wake(P, WAKE_MAX)
end
return 1
