import assert from 'node:assert/strict';
import { test } from 'node:test';

import { loadBundle, scriptNames } from '../src/bundle.js';
import { layoutProblems, loadVectors } from '../src/conformance.js';
import { build } from '../src/layouts.js';

test('every script is assembled with each include once', () => {
  const bundle = loadBundle();
  assert.deepEqual(Object.keys(bundle), scriptNames());
  for (const script of Object.values(bundle)) {
    assert.ok(!/^--- @include/m.test(script.source), script.name);
    const opened = script.source.match(/^-- >>> include (\w+)$/gm) ?? [];
    assert.equal(new Set(opened).size, opened.length, `${script.name} includes a fragment twice`);
    assert.match(script.sha, /^[0-9a-f]{40}$/);
  }
});

test('layouts.js names what every vector file (every Lua header) names', () => {
  assert.deepEqual(layoutProblems(loadVectors()), []);
});

test('build fills KEYS from the named arguments', () => {
  const P = 'emq:{cm}:';
  assert.deepEqual(build('enqueue', P, { id: 'JOB0000000000A', payload: 'x', lane: 'PLR0000000000A', delay_ms: 0,
    priority: 5, unique_key: '', unique_ttl_ms: 0 }), {
    keys: ['emq:{cm}:job:JOB0000000000A', 'emq:{cm}:pending', 'emq:{cm}:schedule'],
    argv: [P, 'JOB0000000000A', 'x', 'PLR0000000000A', '0', '5', '', '0'],
  });
  assert.deepEqual(build('schedule_op', P, { name: 'nightly', op: 'pause', next_ms: 0 }).keys,
    ['emq:{cm}:sched:nightly', 'emq:{cm}:schedules', 'emq:{cm}:sched_numbers']);
  assert.deepEqual(build('complete_batch', P, {}, [['JOB0000000000A', 1], ['JOB0000000000B', 2]]).argv,
    [P, 'JOB0000000000A', '1', 'JOB0000000000B', '2']);
  assert.throws(() => build('enqueue', P, { id: 'JOB0000000000A' }), /needs ARGV payload/);
});
