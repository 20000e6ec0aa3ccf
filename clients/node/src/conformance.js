// The conformance vectors (lua/conformance/*.json) run through this client's
// bundle loader: lay each case's state, EVALSHA its script, compare the reply
// or error and the exact state after under the clock rules of docs/protocol.md.
// Driven by the vectors alone: a new script needs vectors and a line in
// layouts.js, nothing here.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import { LUA_DIR, loadBundle, scriptNames } from './bundle.js';
import { stripTail } from './errors.js';
import { LAYOUTS, build } from './layouts.js';

export const VECTORS_DIR = join(LUA_DIR, 'conformance');
const QUEUE = 'conformance';
const PREFIX = `emq:{${QUEUE}}:`;
const MATCH = `*\\{${QUEUE}\\}*`;
const KINDS = ['hash', 'zset', 'list', 'set', 'string', 'stream'];
const DECIMAL = /^(0|[1-9][0-9]{0,17})$/;

export function loadVectors(dir = VECTORS_DIR) {
  const docs = {};
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    const doc = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    if (doc.script !== file.slice(0, -5)) throw new Error(`${file} names script ${doc.script}`);
    docs[doc.script] = doc;
  }
  return docs;
}

// -- values ---------------------------------------------------------------
// A vector value decoded: Buffer, number, null, array, {now: N} or {json: X}.
function value(v) {
  if (typeof v === 'string') return Buffer.from(v, 'utf8');
  if (typeof v === 'number' || v === null) return v;
  if (Array.isArray(v)) return v.map(value);
  if (v && typeof v === 'object') {
    if ('$hex' in v) return Buffer.from(v.$hex, 'hex');
    if ('$repeat' in v) return Buffer.from(v.$repeat[0].repeat(v.$repeat[1]), 'utf8');
    if ('$now' in v) return { now: v.$now };
    if ('$json' in v) return { json: v.$json };
  }
  throw new Error(`not a vector value: ${JSON.stringify(v)}`);
}

function entry(spec) {
  const kind = KINDS.find((k) => k in spec);
  const raw = spec[kind];
  let val;
  if (kind === 'hash') val = Object.fromEntries(Object.entries(raw).map(([f, v]) => [f, value(v)]));
  else if (kind === 'zset') val = Object.entries(raw).map(([m, s]) => [m, value(s)]);
  else if (kind === 'list' || kind === 'set') val = raw.map(value);
  else if (kind === 'string') val = value(raw);
  else val = raw.map(([id, fields]) => [id, Object.fromEntries(Object.entries(fields).map(([f, v]) => [f, value(v)]))]);
  return { kind, value: val, expire: spec.expire_s ?? null };
}

const state = (spec) => Object.fromEntries(Object.entries(spec).map(([k, e]) => [k, entry(e)]));

function resolveJson(p, t0) {
  if (p && typeof p === 'object' && !Array.isArray(p)) {
    if ('$now' in p && Object.keys(p).length === 1) return t0 + p.$now;
    return Object.fromEntries(Object.entries(p).map(([k, x]) => [k, resolveJson(x, t0)]));
  }
  return Array.isArray(p) ? p.map((x) => resolveJson(x, t0)) : p;
}

// As laid before the call: $now + N is t0 + N; $json its JSON text.
function resolve(v, t0) {
  if (v && v.now !== undefined) return String(t0 + v.now);
  if (v && v.json !== undefined) return JSON.stringify(resolveJson(v.json, t0));
  if (Array.isArray(v)) return v.map((x) => resolve(x, t0));
  return typeof v === 'number' ? String(v) : v;
}

function asInt(v) {
  if (typeof v === 'number') return Number.isInteger(v) ? v : null;
  if (Buffer.isBuffer(v) && DECIMAL.test(v.toString('latin1'))) return Number(v.toString('latin1'));
  return null;
}

function show(v) {
  if (Buffer.isBuffer(v)) return JSON.stringify(v.toString('utf8').slice(0, 80));
  if (v && v.now !== undefined) return v.now ? `now+${v.now}` : 'now';
  if (v && v.json !== undefined) return `json ${JSON.stringify(v.json)}`;
  return JSON.stringify(v);
}

function jsonMatches(p, doc, w) {
  if (p && typeof p === 'object' && !Array.isArray(p)) {
    if ('$now' in p && Object.keys(p).length === 1) {
      return Number.isInteger(doc) && w.t0 + p.$now <= doc && doc <= w.t1 + p.$now;
    }
    if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return false;
    const keys = Object.keys(p);
    return keys.length === Object.keys(doc).length && keys.every((k) => k in doc && jsonMatches(p[k], doc[k], w));
  }
  if (Array.isArray(p)) return Array.isArray(doc) && doc.length === p.length && p.every((x, i) => jsonMatches(x, doc[i], w));
  return doc === p;
}

function matchValue(exp, act, w, where, diffs) {
  const bad = () => diffs.push(`${where}: want ${show(exp)}, got ${show(act)}`);
  if (exp && exp.now !== undefined) {
    const v = asInt(act);
    if (v === null || v < w.t0 + exp.now || v > w.t1 + exp.now) {
      diffs.push(`${where}: want now+${exp.now} within [${w.t0 + exp.now}, ${w.t1 + exp.now}], got ${show(act)}`);
    }
  } else if (exp && exp.json !== undefined) {
    let doc;
    try { doc = JSON.parse(act.toString('utf8')); } catch { return bad(); }
    if (!jsonMatches(exp.json, doc, w)) bad();
  } else if (Array.isArray(exp)) {
    if (!Array.isArray(act) || act.length !== exp.length) return bad();
    exp.forEach((e, i) => matchValue(e, act[i], w, `${where}[${i}]`, diffs));
  } else if (typeof exp === 'number') {
    if (act !== exp) bad();
  } else if (Buffer.isBuffer(exp)) {
    if (!Buffer.isBuffer(act) || !exp.equals(act)) bad();
  } else if (exp !== act) {
    bad();
  }
}

function minutes(w) {
  const out = [];
  for (let m = Math.floor(w.t0 / 60000); m <= Math.floor(w.t1 / 60000); m++) out.push(m);
  return out;
}

function matchState(expected, actual, w) {
  const diffs = [];
  const named = {};
  for (const [key, e] of Object.entries(expected)) {
    let k = key;
    if (key.includes('$MINUTE')) {
      const options = minutes(w).map((m) => key.replace('$MINUTE', String(m)));
      k = options.find((o) => o in actual) ?? options[0];
    }
    named[k] = e;
  }
  for (const key of Object.keys(named).sort()) if (!(key in actual)) diffs.push(`${key}: missing (want ${named[key].kind})`);
  for (const key of Object.keys(actual).sort()) if (!(key in named)) diffs.push(`${key}: not expected, holds a ${actual[key].kind}`);
  for (const key of Object.keys(named).sort()) {
    if (!(key in actual)) continue;
    const exp = named[key];
    const act = actual[key];
    if (exp.kind !== act.kind) {
      diffs.push(`${key}: want a ${exp.kind}, got a ${act.kind}`);
      continue;
    }
    if (exp.kind === 'hash') {
      const want = Object.keys(exp.value).sort();
      const got = Object.keys(act.value).sort();
      if (want.join('\n') !== got.join('\n')) diffs.push(`${key}: fields want ${want}, got ${got}`);
      for (const f of want) if (f in act.value) matchValue(exp.value[f], act.value[f], w, `${key} ${f}`, diffs);
    } else if (exp.kind === 'zset') {
      const want = new Map(exp.value);
      const got = new Map(act.value);
      if ([...want.keys()].sort().join() !== [...got.keys()].sort().join()) {
        diffs.push(`${key}: members want ${[...want.keys()].sort()}, got ${[...got.keys()].sort()}`);
      }
      for (const [m, s] of want) if (got.has(m)) matchValue(s, got.get(m), w, `${key} score of ${m}`, diffs);
    } else if (exp.kind === 'set') {
      const a = exp.value.map((b) => b.toString('hex')).sort().join();
      const b = act.value.map((x) => x.toString('hex')).sort().join();
      if (a !== b) diffs.push(`${key}: want ${exp.value.map(show)}, got ${act.value.map(show)}`);
    } else if (exp.kind === 'stream') {
      if (exp.value.length !== act.value.length) {
        diffs.push(`${key}: want ${exp.value.length} entries, got ${act.value.length}`);
      } else {
        exp.value.forEach(([eid, efields], i) => {
          const [aid, afields] = act.value[i];
          const [ms, seq] = aid.split('-');
          const m = /^\$NOW-(\d+)$/.exec(eid);
          if (m ? !(w.t0 <= Number(ms) && Number(ms) <= w.t1 && seq === m[1]) : eid !== aid) {
            diffs.push(`${key}: entry id want ${eid}, got ${aid}`);
          }
          const fk = Object.keys(efields).sort();
          if (fk.join() !== Object.keys(afields).sort().join()) diffs.push(`${key} ${aid}: fields differ`);
          for (const f of fk) if (f in afields) matchValue(efields[f], afields[f], w, `${key} ${aid} ${f}`, diffs);
        });
      }
    } else {
      matchValue(exp.value, act.value, w, key, diffs);
    }
    if (exp.expire === null && act.pttl !== -1) diffs.push(`${key}: want no TTL, got ${act.pttl} ms`);
    if (exp.expire !== null) {
      const hi = exp.expire * 1000;
      const lo = hi - Math.max(0, w.t2 - w.t0) - 1;
      if (act.pttl < lo || act.pttl > hi) diffs.push(`${key}: want a TTL set to ${exp.expire} s (PTTL in [${lo}, ${hi}]), got ${act.pttl}`);
    }
  }
  return diffs;
}

// -- the server -------------------------------------------------------------
async function timeMs(client) {
  const [secs, micros] = await client.call('TIME');
  return Number(secs) * 1000 + Math.floor(Number(micros) / 1000);
}

async function keysOf(client) {
  const found = new Set();
  let cursor = '0';
  do {
    const [next, batch] = await client.call('SCAN', cursor, 'MATCH', MATCH, 'COUNT', 1000);
    batch.forEach((k) => found.add(k));
    cursor = next;
  } while (cursor !== '0');
  return [...found].sort();
}

async function clean(client) {
  for (const key of await keysOf(client)) await client.call('DEL', key);
}

async function lay(client, before, t0) {
  for (const [key, e] of Object.entries(before)) {
    if (e.kind === 'hash') await client.call('HSET', key, ...Object.entries(e.value).flatMap(([f, v]) => [f, resolve(v, t0)]));
    else if (e.kind === 'zset') await client.call('ZADD', key, ...e.value.flatMap(([m, s]) => [resolve(s, t0), m]));
    else if (e.kind === 'list') await client.call('RPUSH', key, ...resolve(e.value, t0));
    else if (e.kind === 'set') await client.call('SADD', key, ...e.value);
    else if (e.kind === 'string') await client.call('SET', key, resolve(e.value, t0));
    else {
      for (const [id, fields] of e.value) {
        await client.call('XADD', key, id, ...Object.entries(fields).flatMap(([f, v]) => [f, resolve(v, t0)]));
      }
    }
    if (e.expire !== null) await client.call('EXPIRE', key, e.expire);
  }
}

const pairs = (flat) => {
  const out = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i], flat[i + 1]]);
  return out;
};

async function read(client) {
  const out = {};
  for (const key of await keysOf(client)) {
    const kind = await client.call('TYPE', key);
    let val;
    if (kind === 'hash') val = Object.fromEntries(pairs(await client.callBuffer('HGETALL', key)).map(([f, v]) => [f.toString(), v]));
    else if (kind === 'zset') val = pairs(await client.callBuffer('ZRANGE', key, 0, -1, 'WITHSCORES')).map(([m, s]) => [m.toString(), Number(s.toString())]);
    else if (kind === 'list') val = await client.callBuffer('LRANGE', key, 0, -1);
    else if (kind === 'set') val = await client.callBuffer('SMEMBERS', key);
    else if (kind === 'string') val = await client.callBuffer('GET', key);
    else if (kind === 'stream') {
      val = (await client.callBuffer('XRANGE', key, '-', '+'))
        .map(([id, fields]) => [id.toString(), Object.fromEntries(pairs(fields).map(([f, v]) => [f.toString(), v]))]);
    }
    out[key] = { kind, value: val, pttl: await client.call('PTTL', key) };
  }
  return out;
}

async function runCase(client, script, c) {
  const before = state(c.before);
  await clean(client);
  const t0 = await timeMs(client);
  await lay(client, before, t0);
  const argv = c.argv.map(value);
  let outcome;
  let reply;
  try {
    reply = await script.run(client, c.keys, argv);
    outcome = 'reply';
  } catch (err) {
    if (err?.name !== 'ReplyError') throw err;
    outcome = 'error';
    reply = stripTail(err.message);
  }
  const t1 = await timeMs(client);
  const after = await read(client);
  const w = { t0, t1, t2: await timeMs(client) };
  await clean(client);
  const diffs = [];
  if ('error' in c) {
    if (outcome !== 'error' || reply !== c.error) diffs.push(`reply: want error ${JSON.stringify(c.error)}, got ${outcome} ${outcome === 'error' ? reply : show(reply)}`);
  } else if (outcome === 'error') {
    diffs.push(`reply: want ${JSON.stringify(c.reply)}, got error ${JSON.stringify(reply)}`);
  } else {
    matchValue(value(c.reply), reply, w, 'reply', diffs);
  }
  const expected = c.after === 'unchanged' ? before : state(c.after);
  diffs.push(...matchState(expected, after, w));
  return diffs;
}

// -- the client's own layouts against the vectors ---------------------------
const suffix = (template) => template.replace(/^emq:\{q\}:/, '');

export function layoutProblems(docs) {
  const problems = [];
  for (const name of scriptNames()) {
    if (!(name in docs)) problems.push(`${name}: lua/${name}.lua has no vectors`);
  }
  for (const [name, doc] of Object.entries(docs)) {
    const mine = LAYOUTS[name];
    const theirs = { keys: doc.layout.keys.map(([, t]) => suffix(t)), argv: doc.layout.argv, repeated: doc.layout.argv_repeated };
    if (!mine) {
      problems.push(`${name}: no line for it in clients/node/src/layouts.js (vectors: ${JSON.stringify(theirs)})`);
    } else if (JSON.stringify([mine.keys, mine.argv, mine.repeated ?? null]) !== JSON.stringify([theirs.keys, theirs.argv, theirs.repeated ?? null])) {
      problems.push(`${name}: layouts.js says ${JSON.stringify(mine)}, the vectors (the Lua header) ${JSON.stringify(theirs)}`);
    }
  }
  return problems;
}

// Does layouts.build() give an accepted call's KEYS and ARGV from its named arguments?
function buildProblem(name, c) {
  const layout = LAYOUTS[name];
  if (!layout || !('reply' in c)) return null;
  const named = {};
  layout.argv.forEach((n, i) => { named[n] = c.argv[i]; });
  const rest = c.argv.slice(layout.argv.length);
  const tail = [];
  for (let i = 0; i < rest.length; i += 2) tail.push([rest[i], rest[i + 1]]);
  const { keys, argv } = build(name, named.P, named, tail);
  if (JSON.stringify(keys) !== JSON.stringify(c.keys) || JSON.stringify(argv) !== JSON.stringify(c.argv)) {
    return `layouts.build gives KEYS ${JSON.stringify(keys)} ARGV ${JSON.stringify(argv)}, the vector sends ${JSON.stringify(c.keys)} ${JSON.stringify(c.argv)}`;
  }
  return null;
}

// Run every case (or those whose script/name contains `only`); report each.
export async function runVectors(client, { only = null, report = () => {}, docs = loadVectors() } = {}) {
  const bundle = loadBundle();
  const results = [];
  for (const [name, doc] of Object.entries(docs)) {
    for (const c of doc.cases) {
      const label = `${name}/${c.name}`;
      if (only && !label.includes(only)) continue;
      const diffs = bundle[name] ? await runCase(client, bundle[name], c) : [`no script lua/${name}.lua`];
      const problem = buildProblem(name, c);
      if (problem) diffs.push(problem);
      const result = { label, rule: c.rule, diffs };
      results.push(result);
      report(result);
    }
  }
  return results;
}

export { PREFIX };
