// Each script's KEYS and ARGV, as docs/protocol.md lists them and each Lua
// file's header names them. KEYS are suffixes of the queue's prefix
// `emq:{q}:`; `<id>` and `<lane>` are filled from the arguments of those
// names. When a script's arguments change, change its line here: the vector
// runner compares this table with the layout recorded in every vector file
// and fails on a difference, and rebuilds each accepted call's KEYS and ARGV
// from it.
export const LAYOUTS = {
  enqueue: { keys: ['job:<id>', 'pending', 'schedule'], argv: ['P', 'id', 'payload', 'lane', 'delay_ms', 'priority', 'unique_key', 'unique_ttl_ms'] },
  claim: { keys: ['pending', 'active', 'ring', 'meta'], argv: ['P', 'lease_ms', 'n', 'consumer'] },
  complete: { keys: ['job:<id>', 'active'], argv: ['P', 'id', 'token'] },
  complete_batch: { keys: ['active', 'meta'], argv: ['P'], repeated: ['id', 'token'] },
  retry: { keys: ['job:<id>', 'active', 'schedule', 'dead'], argv: ['P', 'id', 'token', 'delay_ms', 'max_attempts', 'error'] },
  extend: { keys: ['job:<id>', 'active'], argv: ['P', 'id', 'token', 'lease_ms'] },
  release: { keys: ['job:<id>', 'active'], argv: ['P', 'id', 'token'] },
  reap: { keys: ['active', 'dead'], argv: ['P', 'max_stalls', 'limit'] },
  promote: { keys: ['schedule'], argv: ['P', 'limit'] },
  requeue: { keys: ['job:<id>', 'dead'], argv: ['P', 'id'] },
  remove: { keys: ['job:<id>', 'pending', 'active', 'schedule', 'dead'], argv: ['P', 'id'] },
  cancel: { keys: ['job:<id>', 'pending', 'schedule'], argv: ['P', 'id'] },
  lane: { keys: ['g:<lane>:meta'], argv: ['P', 'lane', 'op', 'value'] },
  pause: { keys: ['meta'], argv: ['P', 'paused'] },
  counts: { keys: ['pending', 'active', 'schedule', 'dead', 'meta', 'lanes', 'ring'], argv: ['P'] },
  rate: { keys: ['meta'], argv: ['P', 'jobs', 'per_ms'] },
  lane_rate: { keys: ['g:<lane>:meta'], argv: ['P', 'lane', 'jobs', 'per_ms'] },
  schedule_set: { keys: ['sched:<name>', 'schedules', 'sched_numbers'], argv: ['P', 'name', 'kind', 'spec', 'tz', 'payload', 'lane', 'priority', 'catch_up', 'next_ms', 'seq_step', 'seq_offset', 'stamp'] },
  schedule_op: { keys: ['sched:<name>', 'schedules', 'sched_numbers'], argv: ['P', 'name', 'op', 'next_ms'] },
  schedule_fire: { keys: ['sched:<name>', 'schedules'], argv: ['P', 'name', 'rev', 'expect', 'next_ms'], repeated: ['tick', 'id'] },
  progress: { keys: ['job:<id>', 'active'], argv: ['P', 'id', 'token', 'value'] },
  result: { keys: ['job:<id>', 'active'], argv: ['P', 'id', 'token', 'value'] },
  wait: { keys: ['job:<id>'], argv: ['P', 'id'] },
  enqueue_flow: { keys: ['job:<id>'], argv: ['P', 'id', 'payload', 'lane', 'on_child_failure'], repeated: ['child', 'child_payload', 'child_lane'] },
  task_start: { keys: ['task:<id>', 'job:<id>'], argv: ['P', 'id', 'token', 'worker', 'now', 'ttl_ms', 'record'] },
  task_finish: { keys: ['task:<id>'], argv: ['P', 'id', 'token', 'ttl_ms', 'status', 'errors', 'finished_at', 'return_value'] },
};

const text = (v) => (typeof v === 'number' || typeof v === 'bigint' ? String(v) : v);

// KEYS and ARGV of `script` on the queue with `prefix` from named arguments
// (`P` is the prefix); `pairs` fills a repeated tail.
export function build(script, prefix, args = {}, pairs = []) {
  const layout = LAYOUTS[script];
  if (!layout) throw new Error(`no layout for script ${script}: add it to clients/node/src/layouts.js`);
  const named = { P: prefix, ...args };
  const argv = layout.argv.map((name) => {
    if (!(name in named) || named[name] === undefined) throw new Error(`${script} needs ARGV ${name}`);
    return text(named[name]);
  });
  for (const pair of pairs) argv.push(...pair.map(text));
  const keys = layout.keys.map((k) => prefix + k.replace('<id>', named.id ?? '').replace('<lane>', named.lane ?? '')
    .replace('<name>', named.name ?? ''));
  return { keys, argv };
}
