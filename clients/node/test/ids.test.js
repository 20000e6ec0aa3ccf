import assert from 'node:assert/strict';
import { test } from 'node:test';

import { EPOCH_MS, MAX_PAYLOAD, Minter, encode, isValid } from '../src/ids.js';

test('the wire contract\'s public vector', () => {
  assert.equal(encode('USR', 274557032793636864n), 'USR0KHTOWnGLuC');
  assert.equal(MAX_PAYLOAD, 'AzL8n0Y58m7');
});

test('validation is by shape and bound', () => {
  assert.ok(isValid('JOB0000000000A'));
  assert.ok(isValid('JOBAzL8n0Y58m7'));
  for (const bad of ['JOBAzL8n0Y58m8', 'JOB000000000A', 'job0000000000A', 'JOB000000000:A', '', 42]) {
    assert.ok(!isValid(bad), String(bad));
  }
});

test('minting is strictly increasing when the clock stalls, steps back or the sequence fills', () => {
  const times = [Number(EPOCH_MS) + 5000, Number(EPOCH_MS) + 5000, Number(EPOCH_MS) + 4000];
  let i = 0;
  const minter = new Minter(7, () => times[Math.min(i++, times.length - 1)]);
  const ids = Array.from({ length: 5000 }, () => minter.mint('JOB'));
  for (let k = 1; k < ids.length; k++) assert.ok(ids[k - 1] < ids[k], `${ids[k - 1]} < ${ids[k]}`);
  assert.ok(ids.every(isValid));
  // 2048 per millisecond: the sequence's top bit belongs to schedule ticks
  const seqs = Array.from({ length: 4100 }, () => minter.nextN() & 4095n);
  assert.ok(seqs.every((s) => s < 2048n));
  assert.ok(seqs.includes(2047n));
});
