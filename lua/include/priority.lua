-- Priorities. A job's `priority` (an integer, MIN_PRIORITY..MAX_PRIORITY,
-- higher served first; 0 when absent from the row) is its score in a ready
-- set: score = -priority. ZPOPMIN takes the lowest score first and, among
-- equal scores, the lowest member, which for JOB ids is the oldest mint: so
-- within a lane (or the flat set) the highest priority goes first and equal
-- priorities keep admission order. The ring is untouched, so lanes stay fair.
--- @include "args"
local MAX_PRIORITY = 100        -- priorities run -MAX_PRIORITY..MAX_PRIORITY (Django's range)

-- A canonical signed decimal ('0', '7', '-100'; no '+', no '-0', no leading
-- zero) in [-MAX_PRIORITY, MAX_PRIORITY]; EMQARG otherwise.
local function arg_priority(v)
  if type(v) ~= 'string' or not (v == '0' or string.find(v, '^%-?[1-9]%d?%d?$')) then
    arg_fail('priority', 'want an integer, got "' .. string.sub(tostring(v), 1, 40) .. '"')
  end
  local p = tonumber(v)
  if p < -MAX_PRIORITY or p > MAX_PRIORITY then
    arg_fail('priority', v .. ' is outside [' .. -MAX_PRIORITY .. ', ' .. MAX_PRIORITY .. ']')
  end
  return p
end

-- The ready-set score of a row's priority field (nil or a decimal string).
-- 0 - p, not -p: Lua's -0 would reach the server as the score "-0".
local function ready_score(priority)
  return 0 - (tonumber(priority) or 0)
end
