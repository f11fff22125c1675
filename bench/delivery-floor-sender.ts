// The sending half of the webhooks group's delivery floor (bench/delivery-floor.ts), run in a
// process of its own on the service's Node: signed Standard Webhooks POSTs through an undici pool
// to the harness's receiver, with nothing else around them (no worker, no checks of the target).
// Each is signed and framed by the service's own functions (src/events/webhook-signing.ts), so the
// floor's request is byte for byte the shape of a delivery.
// With a database, each answered delivery is also recorded as one row, written in batches as the
// answers come (the least bookkeeping an attempt shown in `…/deliveries` needs). Started by the
// harness with fork(): it is sent the job, warms up, says so, sends `count` more and answers its
// own CPU for those.
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { Pool } from 'undici';
import { eventBody, signMessage } from '../src/events/webhook-signing.js';

interface Job {
  url: string;
  data: string;
  count: number;
  inFlight: number;
  databaseUrl?: string;
}

const FLUSH_ROWS = 128;
const FLUSH_MS = 10;

// One INSERT a batch of answered deliveries, on one connection; flushed() waits for the last.
async function recorder(databaseUrl: string) {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'cns-bench-delivery-floor' });
  await client.connect();
  await client.query(`create table if not exists bench_delivery_floor (
    event_id text not null, subscription_id text not null, status smallint not null,
    attempted_at timestamptz not null default now(), primary key (event_id, subscription_id))`);
  let ids: string[] = [];
  let statuses: number[] = [];
  let timer: NodeJS.Timeout | undefined;
  let writing = Promise.resolve();
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (ids.length === 0) return;
    const batch = { ids, statuses };
    ids = [];
    statuses = [];
    writing = writing.then(async () => {
      await client.query({
        name: 'bench_delivery_floor_insert',
        text: `insert into bench_delivery_floor (event_id, subscription_id, status)
               select id, 'floor', status from unnest($1::text[], $2::smallint[]) as t(id, status)`,
        values: [batch.ids, batch.statuses],
      });
    });
  };
  return {
    record(id: string, status: number) {
      ids.push(id);
      statuses.push(status);
      if (ids.length >= FLUSH_ROWS) flush();
      else timer ??= setTimeout(flush, FLUSH_MS);
    },
    async flushed() {
      flush();
      await writing;
    },
    close: () => client.end(),
  };
}

type Recorder = Awaited<ReturnType<typeof recorder>>;

function sender(job: Job, rows: Recorder | undefined): (n: number) => Promise<void> {
  const url = new URL(job.url);
  const pool = new Pool(url.origin, { connections: job.inFlight });
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const id = `evt_${randomUUID()}`;
      const now = new Date();
      const { headers, body } = signMessage(secret, id, eventBody({ type: 'payment.recorded', createdAt: now, data: job.data }), now);
      let code = 0;
      pool.dispatch(
        { path: url.pathname, method: 'POST', headers, body },
        {
          onRequestStart() {},
          onResponseStart(_controller, status) {
            code = status;
          },
          onResponseData() {},
          onResponseEnd: () => {
            if (code < 200 || code > 299) return reject(new Error(`the receiver answered ${code}`));
            rows?.record(id, code);
            resolve();
          },
          onResponseError: (_controller, error) => reject(error),
        },
      );
    });
  return async (n) => {
    let left = n;
    const lane = async () => {
      while (left > 0) {
        left--;
        await one();
      }
    };
    await Promise.all(Array.from({ length: job.inFlight }, lane));
    await rows?.flushed();
  };
}

process.once('message', (job: Job) => {
  void (async () => {
    const rows = job.databaseUrl === undefined ? undefined : await recorder(job.databaseUrl);
    const send = sender(job, rows);
    await send(Math.ceil(job.count / 4));
    process.send!({ measuring: true });
    const cpu = process.cpuUsage();
    const started = performance.now();
    await send(job.count);
    const used = process.cpuUsage(cpu);
    await rows?.close();
    process.send!({ seconds: (performance.now() - started) / 1000, cpuMicros: used.user + used.system }, () => process.exit(0));
  })().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  });
});
