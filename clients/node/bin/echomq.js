#!/usr/bin/env node
// echomq.js COMMAND --url redis://host:port/db ...
//   conformance [--only TEXT] [-q] [--vectors DIR]   run the vectors (lua/conformance/) on the server
//   enqueue --queue Q                   enqueue JSON lines from stdin: {"id"?, "lane"?, "payload", "delay_ms"?}
//   consume --queue Q [--concurrency N] [--lease-ms MS] [--beat-ms MS] [--max-attempts N]
//           [--handler echo|hang|fail]  run a consumer until SIGTERM
//   shas                                print each script's name and SHA1
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';

import Valkey from 'iovalkey';

import { loadBundle } from '../src/bundle.js';
import { layoutProblems, loadVectors, runVectors } from '../src/conformance.js';
import { Consumer } from '../src/consumer.js';
import { mint } from '../src/ids.js';
import { Queue } from '../src/queue.js';

const { positionals, values: opts } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string' }, vectors: { type: 'string' }, queue: { type: 'string' }, only: { type: 'string' }, quiet: { type: 'boolean', short: 'q' },
    concurrency: { type: 'string', default: '1' }, 'lease-ms': { type: 'string', default: '30000' },
    'beat-ms': { type: 'string', default: '1000' }, 'max-attempts': { type: 'string', default: '3' },
    handler: { type: 'string', default: 'echo' },
  },
});
const command = positionals[0];

function connect() {
  if (!opts.url) throw new Error('--url is required');
  return new Valkey(opts.url, { maxRetriesPerRequest: 3, connectTimeout: 5000 });
}

async function conformance() {
  const client = connect();
  try {
    const docs = loadVectors(opts.vectors);
    const total = Object.values(docs).reduce((n, d) => n + d.cases.length, 0);
    const info = await client.call('INFO', 'server');
    const server = /valkey_version:(\S+)/.exec(info)?.[1] ? `valkey ${/valkey_version:(\S+)/.exec(info)[1]}` : `redis ${/redis_version:(\S+)/.exec(info)?.[1]}`;
    console.log(`echomq conformance (node ${process.version}): ${Object.keys(docs).length} scripts, ${total} cases, on ${opts.url} (${server})`);
    const results = await runVectors(client, {
      docs,
      only: opts.only,
      report: (r) => {
        if (r.diffs.length === 0 && !opts.quiet) console.log(`ok    ${r.label}`);
        if (r.diffs.length) {
          console.log(`FAIL  ${r.label}: ${r.rule}`);
          for (const d of r.diffs) console.log(`        ${d}`);
        }
      },
    });
    const problems = layoutProblems(docs);
    for (const p of problems) console.log(`coverage: ${p}`);
    if (!problems.length) console.log('coverage: every script has vectors; layouts.js agrees with every vector file');
    const failed = results.filter((r) => r.diffs.length).length;
    console.log(`${results.length - failed} passed, ${failed} failed`);
    return failed || problems.length || !results.length ? 1 : 0;
  } finally {
    client.disconnect();
  }
}

async function enqueue() {
  const client = connect();
  const queue = new Queue(opts.queue, client);
  try {
    for await (const line of createInterface({ input: process.stdin })) {
      if (!line.trim()) continue;
      const item = JSON.parse(line);
      const { id, status } = await queue.enqueue(item.payload, { id: item.id ?? mint('JOB'), lane: item.lane ?? '',
        delayMs: item.delay_ms ?? 0 });
      console.log(`${id} ${status}`);
    }
  } finally {
    client.disconnect();
  }
  return 0;
}

const HANDLERS = {
  echo: async (job) => console.log(`handled ${job.id} payload=${JSON.stringify(job.payload.toString('utf8'))}`),
  hang: () => new Promise(() => {}), // never finishes: a worker stuck (or killed) mid-job
  fail: async () => { throw new Error('failing on purpose'); },
};

async function consume() {
  const handler = HANDLERS[opts.handler];
  if (!handler) throw new Error(`--handler is one of ${Object.keys(HANDLERS)}`);
  let consumer = null;
  let stopAsked = false;
  const onSignal = (sig) => {
    console.log(`got ${sig}: stopping`);
    stopAsked = true;
    consumer?.stop();
  };
  process.on('SIGTERM', onSignal); // from the first moment, before connecting
  process.on('SIGINT', onSignal);
  const client = connect();
  try {
    consumer = new Consumer(new Queue(opts.queue, client), handler, {
      concurrency: Number(opts.concurrency), leaseMs: Number(opts['lease-ms']), beatMs: Number(opts['beat-ms']),
      maxAttempts: Number(opts['max-attempts']),
    });
    if (stopAsked) consumer.stop();
    await consumer.run();
  } finally {
    client.disconnect();
  }
  return 0;
}

async function shas() {
  for (const [name, script] of Object.entries(loadBundle())) console.log(`${name} ${script.sha}`);
  return 0;
}

const COMMANDS = { conformance, enqueue, consume, shas };
if (!COMMANDS[command]) {
  console.error('usage: echomq.js conformance|enqueue|consume|shas --url redis://... (see the header of bin/echomq.js)');
  process.exit(2);
}
COMMANDS[command]().then((code) => process.exit(code), (err) => {
  console.error(`echomq.js ${command}: ${err.stack ?? err}`);
  process.exit(1);
});
