-- finish(P, ids, tokens, now): the fenced completion of jobs, shared by
-- complete (one job, the contract's reply) and complete_batch (a consumer's
-- acks). Answers one code per job: 1 completed, 0 gone, -1 stale (nothing
-- changed), -2 cancelled (dropped, see cancel.lua), and how many completed.
-- A job named twice is completed once: the second answer is 0 (gone by then).
-- The active-set removals and row deletions go out as one ZREM and one DEL
-- for all the jobs; each completed job leaves a record (keep.lua).
--- @include "lanes"
--- @include "chunks"
--- @include "cancel"
--- @include "keep"
--- @include "unique"
--- @include "events"
--- @include "ended"

-- The completed-job record (keep.lua): id (the field), state and duration
-- (finished - claimed) are implied. Built by concatenation from the row's
-- own strings (attempts equals the checked token; created and claimed are
-- server ms and lane and consumer branded ids, as these scripts write them),
-- or by cjson from their numbers should a row hold anything else.
local function record_json(attempts, lane, enqueued, claimed, finished, consumer)
  if #enqueued <= 15 and #claimed <= 15 and string.find(enqueued .. ',' .. claimed .. ',' .. lane .. consumer,
      '^%d+,%d+,%w*$') then
    return '{"attempts":' .. attempts .. ',"lane":"' .. lane .. '","enqueued":' .. enqueued .. ',"claimed":'
      .. claimed .. ',"finished":' .. finished .. ',"consumer":"' .. consumer .. '"}'
  end
  return cjson.encode({attempts = tonumber(attempts), lane = lane, enqueued = tonumber(enqueued),
    claimed = tonumber(claimed), finished = tonumber(finished), consumer = consumer})
end

local function finish(P, ids, tokens, now)
  local now_s = string.format('%d', now)
  local codes, gone_ids, rows, records, seen = {}, {}, {}, {}, {}
  local events = events_batch(P)
  for i, id in ipairs(ids) do
    local jk = P .. 'job:' .. id
    local row = redis.call('HMGET', jk, 'state', 'attempts', 'lane', 'cancel', 'created', 'claimed', 'consumer',
      'unique', 'parent', 'wait', 'children', 'counted')
    if not row[1] or seen[id] then
      codes[i] = 0
    elseif row[1] ~= 'active' or row[2] ~= tokens[i] then
      codes[i] = -1
    elseif row[4] == '1' then
      codes[i] = -2
      drop_cancelled(P, id, jk, now)
    else
      codes[i] = 1
      seen[id] = true
      gone_ids[#gone_ids + 1] = id
      rows[#rows + 1] = jk
      lane_release_active(P, row[3], row[12])
      unique_release(P, id, row[8])
      events_add(events, id, row[3], row[2])
      if row[9] or row[10] or row[11] then  -- a waiter or a flow: its entry first, then what follows from it
        emit_batch(P, 'completed', events, '')
        ended(P, id, jk, 'completed', {row[9], row[10], row[11]})
      end
      records[#records + 1] = id
      records[#records + 1] = record_json(row[2], row[3] or '', row[5] or '0', row[6] or now_s, now_s, row[7] or '')
    end
  end
  emit_batch(P, 'completed', events, '')
  in_chunks('ZREM', P .. 'active', gone_ids, 1000)
  in_chunks('DEL', false, rows, 1000)
  keep_completed(P, records, now)
  return codes, #rows
end
