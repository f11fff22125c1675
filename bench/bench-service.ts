import { join } from 'node:path';
import type { BenchTarget } from './database.js';
import { ROOT_DIR } from './options.js';
import { LOOPBACK, SERVER_ARGS, SERVER_NODE, startChild, waitForHttp, type Child } from './processes.js';

// The compiled service as the stations and webhooks groups start it: production, warnings only,
// no rate limit, profile 1 for the bench's stations, on the bench database; `env` adds to that.
// Resolves once it answers /healthz. Its log goes to `dir`.
export async function startBenchService(name: string, port: number, target: BenchTarget, dir: string, env: Record<string, string> = {}): Promise<Child> {
  const child = startChild(name, SERVER_NODE, SERVER_ARGS, {
    cwd: ROOT_DIR,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
      HOST: LOOPBACK,
      PORT: String(port),
      RATE_LIMIT_MAX: '0',
      OCPP_MIN_SECURITY_PROFILE: '1',
      ...(target.kind === 'postgres' ? { DATABASE_URL: target.url } : { DATA_DIR: target.dataDir }),
      ...env,
    },
    logFile: join(dir, `${name}.log`),
  });
  await waitForHttp(child, `http://${LOOPBACK}:${port}/healthz`, 60_000, 200);
  return child;
}
