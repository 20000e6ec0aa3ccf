-- The Django tasks backend's result record (echomq.contrib.django.tasks):
-- a hash beside the task's job, emq:{q}:task:<JOB id>, written by
-- task_start.lua and task_finish.lua. The checks of what they write, so a
-- record always reads back as the backend wrote it. The limits are read by
-- echomq.scripts.LIMITS, as args.lua's are.
--- @include "args"
local MAX_WORKER = 255          -- a worker id (host:pid), in bytes
local MAX_TIME = 40             -- an ISO 8601 time, in bytes

-- The fields a start may fill back in (a task's payload, task_payload() in
-- Python), in the order it fills them.
local TASK_FILL = {'task', 'backend', 'queue', 'args', 'kwargs', 'status', 'enqueued_at', 'run_after',
                   'errors', 'priority'}

local function task_key(P, id)
  return P .. 'task:' .. id
end

-- An ISO 8601 time as Python's datetime.isoformat() writes it
-- ('2026-01-02T03:04:05.678901+00:00').
local function arg_time(v, what)
  if #v > MAX_TIME or not string.find(v, '^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d[%d%.:+%-Z]*$') then
    arg_fail(what, 'want an ISO 8601 time, got "' .. string.sub(v, 1, 40) .. '"')
  end
  return v
end

-- JSON text; `open`: its first character, '[' for an array or '{' for an
-- object (cjson decodes both to a table).
local function arg_json(v, what, open)
  local ok, doc = pcall(cjson.decode, v)
  if not ok or v == '' or (open and string.sub(v, 1, 1) ~= open) then
    arg_fail(what, 'want ' .. (open == '[' and 'a JSON array' or open == '{' and 'a JSON object' or 'JSON text'))
  end
  return doc
end

-- A worker id: 1..MAX_WORKER bytes without ',' (the record joins them with commas).
local function arg_worker(v)
  if v == '' or #v > MAX_WORKER or string.find(v, ',', 1, true) then
    arg_fail('worker', 'want 1 to ' .. MAX_WORKER .. ' bytes without ","')
  end
  return v
end

-- '' where the rest of the call says the argument has no value.
local function arg_empty(v, what, why)
  if v ~= '' then arg_fail(what, "want '' " .. why) end
end

-- A start's fill: a JSON object of TASK_FILL fields, each value text.
local function arg_fill(v)
  local doc = arg_json(v, 'record', '{')
  local known = {}
  for _, f in ipairs(TASK_FILL) do known[f] = true end
  for f, x in pairs(doc) do
    if not known[f] then arg_fail('record', 'a task record has no field "' .. string.sub(tostring(f), 1, 40) .. '"') end
    if type(x) ~= 'string' then arg_fail('record', 'its ' .. f .. ' must be a string') end
  end
  return doc
end
