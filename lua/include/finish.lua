-- finish(P, ids, tokens): the fenced completion of jobs, shared by complete
-- (one job, the contract's reply) and complete_batch (a consumer's acks).
-- Answers one code per job: 1 completed, 0 gone, -1 stale (nothing changed),
-- and how many completed. The active-set removals and row deletions go out
-- as one ZREM and one DEL for all the jobs.
--- @include "lanes"
--- @include "chunks"

local function finish(P, ids, tokens)
  local codes, gone_ids, rows = {}, {}, {}
  for i, id in ipairs(ids) do
    local jk = P .. 'job:' .. id
    local row = redis.call('HMGET', jk, 'state', 'attempts', 'lane')
    if not row[1] then
      codes[i] = 0
    elseif row[1] ~= 'active' or row[2] ~= tokens[i] then
      codes[i] = -1
    else
      codes[i] = 1
      gone_ids[#gone_ids + 1] = id
      rows[#rows + 1] = jk
      if row[3] and row[3] ~= '' then lane_release_active(P, row[3]) end
    end
  end
  in_chunks('ZREM', P .. 'active', gone_ids, 1000)
  in_chunks('DEL', false, rows, 1000)
  return codes, #rows
end
