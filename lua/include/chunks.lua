-- in_chunks(cmd, key, items, step): one command per `step` items, since
-- unpack() of a very long list overflows Lua's C stack. key may be false
-- for commands that take only the items (DEL). step keeps pairs together.
local function in_chunks(cmd, key, items, step)
  for i = 1, #items, step do
    local j = math.min(i + step - 1, #items)
    if key then
      redis.call(cmd, key, unpack(items, i, j))
    else
      redis.call(cmd, unpack(items, i, j))
    end
  end
end
