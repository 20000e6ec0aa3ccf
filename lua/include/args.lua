-- Argument checks, run by every script before its first write, so a bad
-- argument can never leave half a transition behind. A failed check raises
-- the error reply 'EMQARG <what>: <why>' (error() aborts the script; nothing
-- was written yet). Only plain Lua 5.1 string functions: runs on Redis 7.0.
--
-- The limits are named here once; echomq/scripts.py reads these lines so
-- the Python API checks the very same bounds before sending.
local MAX_MS = 31536000000      -- delays and leases: one year
local MAX_COUNT = 1000000       -- max_attempts, max_stalls, lane limits, retention counts
local MAX_BATCH = 10000         -- jobs per claim / reap / promote / complete_batch call
local MAX_TOKEN = 999999999999999  -- a fencing token (attempts) fits 15 digits
local MAX_TEXT = 65536          -- an error text, in bytes

local function arg_fail(what, why)
  error({err = 'EMQARG ' .. what .. ': ' .. why})
end

-- A canonical decimal integer (no sign, no leading zero, no exponent, no
-- fraction: so never NaN, inf or 1e400) in [lo, hi].
local function arg_int(v, what, lo, hi)
  if type(v) ~= 'string' or not (v == '0' or string.find(v, '^[1-9]%d*$')) or #v > 15 then
    arg_fail(what, 'want an integer, got "' .. string.sub(tostring(v), 1, 40) .. '"')
  end
  local n = tonumber(v)
  if n < lo or n > hi then arg_fail(what, v .. ' is outside [' .. lo .. ', ' .. hi .. ']') end
  return n
end

-- The shape of a branded id: 3 upper-case letters, 11 base62 characters,
-- payload at most 'AzL8n0Y58m7' (2^63-1). Same-length strings of an
-- ASCII-ordered alphabet compare as their numbers.
local function is_branded(v)
  return type(v) == 'string' and #v == 14 and string.find(v, '^[A-Z][A-Z][A-Z][0-9A-Za-z]+$') ~= nil
    and string.sub(v, 4) <= 'AzL8n0Y58m7'
end

local function arg_id(v, what)
  if not is_branded(v) then arg_fail(what, 'want a branded id, got "' .. string.sub(tostring(v), 1, 40) .. '"') end
  return v
end

-- A job id: branded, and JOB-branded (EMQKIND otherwise, the contract's code).
local function arg_job(v)
  arg_id(v, 'id')
  if string.sub(v, 1, 3) ~= 'JOB' then error({err = 'EMQKIND job id must be JOB-branded: ' .. v}) end
  return v
end

-- A lane: a branded id, or '' (flat) when `flat_ok`.
local function arg_lane(v, flat_ok)
  if flat_ok and v == '' then return v end
  return arg_id(v, 'lane')
end

-- The queue prefix 'emq:{q}:' with q per the grammar ([A-Za-z0-9._-]{1,128}, not 'emq').
local function arg_prefix(v)
  local q = type(v) == 'string' and string.match(v, '^emq:{([A-Za-z0-9._%-]+)}:$')
  if not q or #q > 128 or q == 'emq' then
    arg_fail('prefix', 'want emq:{<queue>}:, got "' .. string.sub(tostring(v), 1, 40) .. '"')
  end
  return v
end

-- KEYS[i] must be the key the arguments name (a caller cannot point a
-- transition at another queue's or a made-up key).
local function arg_key(i, want)
  if KEYS[i] ~= want then arg_fail('KEYS[' .. i .. ']', 'want ' .. want) end
end

local function arg_count(n)
  if #ARGV ~= n then arg_fail('ARGV', 'want ' .. n .. ' arguments, got ' .. #ARGV) end
end

-- The opening every call on one job by id (cancel, requeue, remove) shares:
-- ARGV prefix, id and then n - 2 of its own; KEYS[1] the job row.
local function arg_job_row(n)
  arg_count(n)
  local P = arg_prefix(ARGV[1])
  local id = arg_job(ARGV[2])
  arg_key(1, P .. 'job:' .. id)
  return P, id
end

-- The opening every fenced call (complete, release, extend, retry) shares:
-- ARGV prefix, id, token and then n - 3 of its own; KEYS job row, active.
local function arg_fenced(n)
  arg_count(n)
  local P = arg_prefix(ARGV[1])
  local id = arg_job(ARGV[2])
  arg_int(ARGV[3], 'token', 1, MAX_TOKEN)
  arg_key(1, P .. 'job:' .. id)
  arg_key(2, P .. 'active')
  return P, id
end

local function arg_text(v, what)
  if #v > MAX_TEXT then arg_fail(what, 'longer than ' .. MAX_TEXT .. ' bytes') end
  return v
end
