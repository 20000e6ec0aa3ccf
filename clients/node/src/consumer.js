// The consumer loop: claim jobs under a lease, run the handler, settle each
// job with its fencing token; park on the wake list (BLPOP) when nothing is
// ready, and keep long jobs leased with a heartbeat.
//
//   while not stopped:
//     free = concurrency - jobs in hand        (none free: wait for one)
//     claim up to `free` jobs; start a handler for each
//     claimed fewer than free -> BLPOP emq:{q}:wake for up to one beat (or until
//       a cooling lane holding a ready job reopens); when the queue's rate
//       window held a ready job back, sleep until it reopens instead
//
// A handler that returns completes its job (complete with the token); one
// that throws has it retried after a backoff, dead-lettered at maxAttempts.
// Every leaseMs/3 the heartbeat extends the lease of every job in hand; a
// refused extend (stale, gone, cancelled) aborts job.abort, and the settle
// that follows is refused by the queue anyway. stop() (SIGTERM in the CLI)
// stops claiming, wakes a parked BLPOP, and lets the jobs in hand finish.
import { Cancelled, StaleToken } from './errors.js';
import { mint } from './ids.js';

export function exponentialBackoff(baseMs = 1000, capMs = 60000) {
  return (attempt) => {
    const delay = Math.min(capMs, baseMs * 2 ** Math.max(0, attempt - 1));
    return Math.floor(delay / 2) + Math.floor(Math.random() * (Math.floor(delay / 2) + 1));
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Consumer {
  constructor(queue, handler, { concurrency = 1, leaseMs = 30000, beatMs = 1000, maxAttempts = 3,
    backoff = exponentialBackoff(), graceMs = 10000, log = (line) => console.log(line) } = {}) {
    this.queue = queue;
    this.handler = handler;
    this.concurrency = concurrency;
    this.leaseMs = leaseMs;
    this.beatMs = beatMs;
    this.maxAttempts = maxAttempts;
    this.backoff = backoff;
    this.graceMs = graceMs;
    this.log = log;
    this.id = mint('CSR');
    this.inHand = new Map(); // job id -> { job, done: Promise }
    this.stopping = false;
    this.blocker = null;
    this.slotFreed = null;
    this.wakeRateWait = null;
    this.stats = { completed: 0, retried: 0, dead: 0, stale: 0, cancelled: 0, gone: 0 };
  }

  say(event, job, more = '') {
    this.log(`consumer ${this.id} ${event} ${job.id} token=${job.token}${job.lane ? ` lane=${job.lane}` : ''}${more}`);
  }

  stop() {
    if (this.stopping) return;
    this.stopping = true;
    this.log(`consumer ${this.id} stopping: finishing ${this.inHand.size} jobs in hand`);
    this.blocker?.disconnect(); // ends a parked BLPOP now, not at the end of its beat
    this.wakeRateWait?.();
    this.slotFreed?.();
  }

  async run() {
    this.blocker = this.queue.client.duplicate(); // BLPOP blocks its connection: a second one parks
    const heartbeat = setInterval(() => this.beat().catch((err) => this.log(`consumer ${this.id} heartbeat failed: ${err.message}`)),
      Math.max(10, Math.floor(this.leaseMs / 3)));
    this.log(`consumer ${this.id} started: queue=${this.queue.name} concurrency=${this.concurrency} lease_ms=${this.leaseMs}`);
    let failures = 0;
    try {
      while (!this.stopping) {
        const free = this.concurrency - this.inHand.size;
        if (free <= 0) {
          await new Promise((resolve) => { this.slotFreed = resolve; });
          continue;
        }
        let jobs;
        try {
          jobs = await this.queue.claim({ n: free, leaseMs: this.leaseMs, consumer: this.id });
          failures = 0;
        } catch (err) {
          if (this.stopping) break;
          failures += 1;
          const delay = Math.min(5000, 50 * 2 ** Math.min(failures, 7));
          this.log(`consumer ${this.id} claim failed (${err.message}); retrying in ${delay}ms`);
          await sleep(delay);
          continue;
        }
        for (const job of jobs) this.start(job);
        if (jobs.length < free && jobs.queueWaitMs > 0) await this.rateWait(jobs.queueWaitMs);
        else if (jobs.length < free) await this.park(jobs.laneWaitMs > 0 ? jobs.laneWaitMs : Infinity);
      }
      const deadline = Date.now() + this.graceMs;
      await Promise.race([Promise.allSettled([...this.inHand.values()].map((h) => h.done)),
        sleep(Math.max(0, deadline - Date.now()))]);
    } finally {
      clearInterval(heartbeat);
      this.blocker.disconnect();
    }
    const s = this.stats;
    this.log(`consumer ${this.id} stopped: completed=${s.completed} retried=${s.retried} dead=${s.dead} `
      + `stale=${s.stale} cancelled=${s.cancelled} left_leased=${this.inHand.size}`);
  }

  // The queue's rate window is full with a job ready behind it: wait until
  // it reopens (a beat at most, so a limit cleared meanwhile is seen), deaf
  // to wake tokens, as a new job cannot open the window; stop() ends it.
  async rateWait(waitMs) {
    if (this.stopping) return; // stop() came while the claim was on its way
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.min(this.beatMs, waitMs));
      this.wakeRateWait = () => { clearTimeout(timer); resolve(); };
    });
    this.wakeRateWait = null;
  }

  // Wait for a wake token for up to a beat, or until a cooling lane reopens
  // (waitMs, when its limit held back a ready job: no token comes for that).
  async park(waitMs = Infinity) {
    try {
      await this.blocker.blpop(this.queue.wakeKey, Math.max(1, Math.min(this.beatMs, waitMs)) / 1000);
    } catch (err) {
      if (!this.stopping) {
        this.log(`consumer ${this.id} park failed (${err.message})`);
        await sleep(this.beatMs);
      }
    }
  }

  start(job) {
    const done = this.handle(job).finally(() => {
      this.inHand.delete(job.id);
      this.slotFreed?.();
    });
    this.inHand.set(job.id, { job, done });
  }

  async handle(job) {
    this.say('started', job);
    let failure = null;
    try {
      await this.handler(job);
    } catch (err) {
      failure = err ?? new Error('handler failed');
    }
    try {
      if (failure === null) {
        const completed = await this.queue.complete(job.id, job.token);
        this.settled(job, completed ? 'completed' : 'gone');
      } else {
        const outcome = await this.queue.retry(job.id, job.token, {
          delayMs: this.backoff(job.token), maxAttempts: this.maxAttempts, error: String(failure.stack ?? failure),
        });
        this.settled(job, outcome === 'scheduled' ? 'retried' : outcome, ` error=${JSON.stringify(String(failure.message ?? failure))}`);
      }
    } catch (err) {
      if (err instanceof StaleToken) this.settled(job, 'stale', ' (the lease was reaped: refused)');
      else if (err instanceof Cancelled) this.settled(job, 'cancelled', ' (refused)');
      else this.say('unsettled', job, ` (${err.message}; the reaper will return it)`);
    }
  }

  settled(job, outcome, more = '') {
    this.stats[outcome] = (this.stats[outcome] ?? 0) + 1;
    this.say(outcome, job, more);
  }

  async beat() {
    for (const { job } of [...this.inHand.values()]) {
      if (job.lost) continue;
      try {
        const deadline = await this.queue.extend(job.id, job.token, this.leaseMs);
        if (deadline === 0) {
          job.abort.abort();
          this.say('lost', job, ' (gone)');
        }
      } catch (err) {
        if (!(err instanceof StaleToken || err instanceof Cancelled)) throw err;
        job.abort.abort();
        this.say('lost', job, err instanceof Cancelled ? ' (cancelled)' : ' (stale: reaped)');
      }
    }
  }
}
