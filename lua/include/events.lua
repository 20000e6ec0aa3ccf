-- The event stream: every transition appends one entry to the capped stream
-- P..'events' inside its own script, so the entry and the change it reports
-- happen in one atomic step, and a refused call (bad argument, stale token,
-- duplicate) writes none: each site calls emit after its checks.
--
-- An entry reports one step: one transition of one job, or of every job a
-- batch call moved at once (a claim, a complete_batch, a promote, a flow's
-- children: the same decision for each). It has five fields, always these, in this order (a stream stores an
-- entry whose field names equal those of its node's first entry as values
-- only, so a fixed set keeps entries small):
--   type     what happened: enqueued claimed completed retried dead stalled
--            released promoted requeued removed cancelling cancelled progress
--            admitted (docs/echomq.md says what each means)
--   job      the JOB id; for a batch, the ids separated by single spaces
--   lane     each job's lane, '-' for a flat job (as many as job, same order)
--   attempt  each job's attempts (its fencing token) after the step (same)
--   data     '' or a JSON object: what the step decided, for every job of it
--            (a retry's run_at, a dead job's error, a claim's lease deadline)
-- Ids are the server's: <ms>-<seq>, increasing; a reader resumes after the
-- last id it saw. One entry per batch rather than per job: each XADD from a
-- script costs about as much as a job's claim and complete together
-- (measured: docs/echomq.md), so a claim of 65 jobs writes one entry.
--
-- The cap is the meta field 'events': absent means KEEP_EVENTS (measured:
-- docs/echomq.md), '0' turns the stream off. Trimming is approximate
-- (MAXLEN ~), whole stream nodes at a time, so it costs O(1) per entry.
-- emit never fails on a bad setting (a script must not stop half-way
-- through its writes): anything but a whole number >= 0 reads as the default.
local KEEP_EVENTS = 10000
local MAX_PROGRESS = 1024  -- a progress value: bytes of JSON

local events_cap = false  -- the cap, read once per script call
local events_ms = false   -- the ms of this call's first entry: every entry of one call shares it

local function events_maxlen(P)
  if events_cap == false then
    local n = tonumber(redis.call('HGET', P .. 'meta', 'events') or '')
    if not n or n < 0 or n ~= math.floor(n) then n = KEEP_EVENTS end
    events_cap = n
  end
  return events_cap
end

-- xadd(P, cap, job, lane, attempt, kind, data): the one XADD. A call's first
-- entry gets the server's id ('*'); the others '<its ms>-*', the same ms and
-- the next sequence numbers (never below the stream's top, so never refused),
-- so the entries of one atomic step carry one time, whichever server runs it
-- (Redis 7.0's clock moves on inside a script; Valkey's stands still).
local function xadd(P, cap, job, lane, attempt, kind, data)
  local id = redis.call('XADD', P .. 'events', 'MAXLEN', '~', cap, events_ms and (events_ms .. '-*') or '*',
    'type', kind, 'job', job, 'lane', lane, 'attempt', attempt, 'data', data or '')
  if not events_ms then events_ms = string.match(id, '^%d+') end
end

-- emit(P, kind, id, lane, attempt, data): one job's step (when events are on).
local function emit(P, kind, id, lane, attempt, data)
  local cap = events_maxlen(P)
  if cap > 0 then
    xadd(P, cap, id, (lane and lane ~= '') and lane or '-', attempt or 0, kind, data)
  end
end

-- A batch's entry: events_batch() gives a collector (nil when events are
-- off, so a batch costs nothing then), events_add(batch, id, lane, attempt)
-- adds a job, emit_batch(P, kind, batch, data) writes the one entry
-- (nothing for an empty batch) and empties the batch, so a script that must
-- report something caused by a job of the batch (a flow's parent admitted
-- by its last child) writes the batch so far first, keeping the order.
local function events_batch(P)
  if events_maxlen(P) > 0 then return {{}, {}, {}} end
  return nil
end

local function events_add(batch, id, lane, attempt)
  if batch then
    local n = #batch[1] + 1
    batch[1][n], batch[2][n], batch[3][n] = id, (lane and lane ~= '') and lane or '-', attempt or 0
  end
end

-- events_add_row(batch, id, jk): add a job, its lane and attempts read from its row.
local function events_add_row(batch, id, jk)
  if batch then
    local row = redis.call('HMGET', jk, 'lane', 'attempts')
    events_add(batch, id, row[1], row[2])
  end
end

local function emit_batch(P, kind, batch, data)
  if batch and #batch[1] > 0 then
    xadd(P, events_maxlen(P), table.concat(batch[1], ' '), table.concat(batch[2], ' '),
      table.concat(batch[3], ' '), kind, data)
    batch[1], batch[2], batch[3] = {}, {}, {}
  end
end

-- emit_row(P, kind, id, jk, data): the same, reading lane and attempts from
-- the job's row (for the sites that have not read them already).
local function emit_row(P, kind, id, jk, data)
  if events_maxlen(P) > 0 then
    local row = redis.call('HMGET', jk, 'lane', 'attempts')
    emit(P, kind, id, row[1], row[2], data)
  end
end

-- brief(text): an error's first line, at most 200 bytes, for an entry's data.
-- (Data objects are written key by key, not by cjson.encode of a table, whose
-- key order differs between servers: every server writes the same bytes.)
local function brief(text)
  local line = string.match(text or '', '^[^\n]*') or ''
  return string.sub(line, 1, 200)
end
