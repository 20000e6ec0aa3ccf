// The queue: one method per transition of the bundle, each a call of the
// script with the KEYS and ARGV its layout names (layouts.js). Arguments are
// checked here against the scripts' own rules before anything is sent (the
// scripts check them again); errors come back typed (errors.js).
import { loadBundle } from './bundle.js';
import { ArgumentError, InvalidName, KindError, translate } from './errors.js';
import { isValid } from './ids.js';
import { build } from './layouts.js';

const QUEUE_NAME = /^[A-Za-z0-9._-]{1,128}$/;
export const MAX_MS = 31536000000;
export const MAX_COUNT = 1000000;
export const MAX_BATCH = 10000;

let sharedBundle;

export function checkInt(value, what, lo, hi) {
  if (!Number.isSafeInteger(value) || value < lo || value > hi) {
    throw new ArgumentError(`${what} must be an integer in [${lo}, ${hi}], got ${value}`);
  }
  return value;
}

export function checkJobId(id) {
  if (!isValid(id)) throw new InvalidName(`ill-formed job id: ${id}`);
  if (!id.startsWith('JOB')) throw new KindError(`job id must be JOB-branded, got ${id}`);
  return id;
}

function checkLane(lane) {
  if (!isValid(lane)) throw new InvalidName(`ill-formed lane: ${lane} (lanes are branded ids)`);
  return lane;
}

const ENQUEUED = { 0: 'duplicate', 1: 'enqueued', 2: 'scheduled' };

export class Job {
  constructor(id, payload, token, lane) {
    this.id = id;
    this.payload = payload; // a Buffer: the bytes enqueued
    this.token = token;     // the attempts count the claim answered: the fencing token
    this.lane = lane || null;
    this.abort = new AbortController(); // aborted when its lease is lost or it was cancelled
  }

  get lost() { return this.abort.signal.aborted; }
}

export class Queue {
  constructor(name, client, { bundle } = {}) {
    if (typeof name !== 'string' || !QUEUE_NAME.test(name) || name === 'emq') {
      throw new InvalidName(`ill-formed queue name: ${name}`);
    }
    this.name = name;
    this.client = client;
    this.prefix = `emq:{${name}}:`;
    this.wakeKey = `${this.prefix}wake`;
    this.bundle = bundle ?? (sharedBundle ??= loadBundle());
  }

  async run(script, args = {}, pairs = []) {
    const { keys, argv } = build(script, this.prefix, args, pairs);
    try {
      return await this.bundle[script].run(this.client, keys, argv);
    } catch (err) {
      throw translate(err);
    }
  }

  // Admit a job; the JOB id is the idempotency key ('duplicate': nothing changed).
  // priority: -100..100, higher first in its lane; a job holding uniqueKey makes
  // another enqueue with it answer that job's id as the duplicate.
  async enqueue(payload, { id, lane = '', delayMs = 0, priority = 0, uniqueKey = '', uniqueTtlMs = 0 } = {}) {
    if (!id) throw new ArgumentError('enqueue needs a JOB id (ids.mint("JOB"))');
    checkJobId(id);
    if (lane) checkLane(lane);
    checkInt(delayMs, 'delayMs', 0, MAX_MS);
    if (!Number.isInteger(priority) || priority < -100 || priority > 100) {
      throw new ArgumentError(`priority must be an integer in [-100, 100], got ${priority}`);
    }
    if (uniqueKey && !/^[A-Za-z0-9._:@/+=-]{1,200}$/.test(uniqueKey)) {
      throw new ArgumentError(`uniqueKey must be 1 to 200 of [A-Za-z0-9._:@/+=-], got ${uniqueKey}`);
    }
    checkInt(uniqueTtlMs, 'uniqueTtlMs', 0, MAX_MS);
    if (uniqueTtlMs && !uniqueKey) throw new ArgumentError('uniqueTtlMs needs a uniqueKey');
    const body = Buffer.isBuffer(payload) ? payload : Buffer.from(String(payload));
    const reply = await this.run('enqueue', { id, payload: body, lane, delay_ms: delayMs, priority,
      unique_key: uniqueKey, unique_ttl_ms: uniqueTtlMs });
    if (Buffer.isBuffer(reply) || typeof reply === 'string') return { id: String(reply), status: 'duplicate' };
    return { id, status: ENQUEUED[reply] };
  }

  // Lease up to n ready jobs under a lease of leaseMs on the server clock.
  // The array also carries queueWaitMs and laneWaitMs: when a rate limit
  // holds back a ready job, the ms until a window opens (0 otherwise), from
  // the reply's last entry.
  async claim({ n = 1, leaseMs = 30000, consumer = '' } = {}) {
    checkInt(n, 'n', 1, MAX_BATCH);
    checkInt(leaseMs, 'leaseMs', 1, MAX_MS);
    if (consumer && !isValid(consumer)) throw new ArgumentError(`consumer must be a branded id, got ${consumer}`);
    const reply = await this.run('claim', { lease_ms: leaseMs, n, consumer });
    const jobs = [];
    for (let i = 0; i + 3 < reply.length; i += 4) {
      jobs.push(new Job(reply[i].toString(), reply[i + 1], Number(reply[i + 2]), reply[i + 3].toString()));
    }
    const waits = reply.length % 4 === 1 ? reply[reply.length - 1] : [0, 0];
    jobs.queueWaitMs = Number(waits[0]);
    jobs.laneWaitMs = Number(waits[1]);
    return jobs;
  }

  // True when completed, false when the job was gone; StaleToken or Cancelled otherwise.
  async complete(id, token) {
    return (await this.run('complete', { id: checkJobId(id), token: this.#token(token) })) === 1;
  }

  // One code per job: 1 completed, 0 gone, -1 stale, -2 cancelled.
  async completeMany(pairs) {
    if (pairs.length < 1 || pairs.length > MAX_BATCH) throw new ArgumentError(`completeMany takes 1 to ${MAX_BATCH} jobs`);
    return this.run('complete_batch', {}, pairs.map(([id, token]) => [checkJobId(id), this.#token(token)]));
  }

  // 'scheduled' to run again after delayMs, 'dead' at maxAttempts, 'gone' with no row.
  async retry(id, token, { delayMs = 0, maxAttempts = 3, error = '' } = {}) {
    checkInt(delayMs, 'delayMs', 0, MAX_MS);
    checkInt(maxAttempts, 'maxAttempts', 1, MAX_COUNT);
    const text = Buffer.from(String(error)).subarray(0, 65536);
    const reply = await this.run('retry', {
      id: checkJobId(id), token: this.#token(token), delay_ms: delayMs, max_attempts: maxAttempts, error: text,
    });
    return reply === 0 ? 'gone' : reply.toString();
  }

  // The heartbeat: the new lease deadline (server ms), 0 when the row is gone.
  async extend(id, token, leaseMs = 30000) {
    checkInt(leaseMs, 'leaseMs', 1, MAX_MS);
    return this.run('extend', { id: checkJobId(id), token: this.#token(token), lease_ms: leaseMs });
  }

  // Hand back a job never started: ready again, not counted as an attempt.
  async release(id, token) {
    return (await this.run('release', { id: checkJobId(id), token: this.#token(token) })) === 1;
  }

  async reap({ maxStalls = 2, limit = 1000 } = {}) {
    const [returned, dead] = await this.run('reap', { max_stalls: checkInt(maxStalls, 'maxStalls', 0, MAX_COUNT),
      limit: checkInt(limit, 'limit', 1, MAX_BATCH) });
    return { returned, dead };
  }

  async promote({ limit = 1000 } = {}) {
    return this.run('promote', { limit: checkInt(limit, 'limit', 1, MAX_BATCH) });
  }

  async counts() {
    const names = ['pending', 'active', 'scheduled', 'dead', 'completed', 'dead_total', 'lanes', 'ring', 'paused',
      'cancelled_total', 'retained'];
    const reply = await this.run('counts');
    return Object.fromEntries(names.map((n, i) => [n, reply[i]]));
  }

  #token(token) {
    return checkInt(token, 'token', 1, 999999999999999);
  }
}
