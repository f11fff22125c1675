// The least a delivery can cost this machine's CPU (bench/README.md, "Webhooks group", "The
// delivery floor"): a signed POST sent by a bare undici pool in a process of its own
// (delivery-floor-sender.ts, on the service's Node) and answered by the harness's receiver, with
// no worker and no target check; with a database, one row written for each (in batches), the
// least an attempt that `…/deliveries` shows needs. What two of them cost, beside what recording
// a payment costs, bounds the recording ratio any implementation could reach on this machine.
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { BENCH_DIR, ROOT_DIR } from './options.js';
import { postgresCpuMs, SERVER_NODE, SERVER_NODE_ARGS } from './processes.js';

export interface DeliveryFloor {
  deliveries: number;
  perSecond: number;
  // CPU µs per delivery: the sending process's, the harness's (the receiver's: nothing else runs
  // in it meanwhile), and PostgreSQL's when a row is written for each (null without).
  senderMicros: number;
  receiverMicros: number;
  postgresMicros: number | null;
}

type Message = { measuring: true } | { seconds: number; cpuMicros: number };

export async function measureDeliveryFloor(
  url: string,
  data: string,
  options: { databaseUrl?: string; count?: number; inFlight?: number } = {},
): Promise<DeliveryFloor> {
  const { databaseUrl, count = 40_000, inFlight = 128 } = options;
  const child = fork(join(BENCH_DIR, 'delivery-floor-sender.ts'), [], {
    cwd: ROOT_DIR,
    execPath: SERVER_NODE,
    execArgv: [...SERVER_NODE_ARGS, '--import', 'tsx'],
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  try {
    return await new Promise<DeliveryFloor>((resolve, reject) => {
      let harness: NodeJS.CpuUsage | undefined;
      let postgres = 0;
      child.on('message', (message: Message) => {
        if ('measuring' in message) {
          harness = process.cpuUsage();
          if (databaseUrl !== undefined) postgres = postgresCpuMs();
          return;
        }
        const receiver = process.cpuUsage(harness);
        resolve({
          deliveries: count,
          perSecond: count / message.seconds,
          senderMicros: message.cpuMicros / count,
          receiverMicros: (receiver.user + receiver.system) / count,
          postgresMicros: databaseUrl === undefined ? null : ((postgresCpuMs() - postgres) * 1000) / count,
        });
      });
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`the delivery floor's sender exited with ${code} before it answered`)));
      child.send({ url, data, count, inFlight, ...(databaseUrl === undefined ? {} : { databaseUrl }) });
    });
  } finally {
    child.kill();
  }
}
