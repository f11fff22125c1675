import { fileURLToPath } from 'node:url';

export interface BenchOptions {
  quick: boolean;
  // Only the 100-ID list against the naive server and pgbench (targets a–c): `npm run bench:baseline`.
  baselineOnly: boolean;
  // Only the server's memory at start (PGlite first and later start, PostgreSQL): `--memory`.
  memoryOnly: boolean;
  // Only the 100-ID list against its floor (bench/floor-server.ts): `--floor`, and `--peers`.
  floorOnly: boolean;
  // The floor's comparison with Platformatic DB and PostGraphile beside it (bench/peers.ts): `--peers`.
  peers: boolean;
  // Rotated rounds of the service and the floor (and the peers) side by side, at each size.
  floorRounds: number;
  runs: number;
  durationSeconds: number;
  warmupSeconds: number;
  sizes: number[];
  build: boolean;
  out: string;
  databaseUrl: string | undefined;
  // Start a throwaway PostgreSQL cluster configured for the benchmark instead of using DATABASE_URL.
  ownPostgres: boolean;
  // Connection pool size of the service and of the naive server alike.
  poolMax: number;
  // Accept-Encoding of the service's list requests (a client that asks for compression); unset:
  // the header is not sent, as by the clients the targets are set for.
  acceptEncoding: string | undefined;
}

export const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));
export const ROOT_DIR = fileURLToPath(new URL('..', import.meta.url));

const USAGE = `usage: tsx bench/run.ts [--quick] [--baseline] [--memory] [--runs N] [--duration SECONDS] [--sizes 10000,1000000] [--no-build] [--out FILE] [--own-postgres] [--pool N] [--accept-encoding VALUE] [--floor] [--peers] [--rounds N]
  --quick       10,000 rows only, 5 s per scenario (development)
  --baseline    only the 100-ID list: service vs naive server vs pgbench (targets a-c)
  --floor       only the 100-ID list, network-scoped, against its floor (node:http + pg running
                the service's statement): ratio and CPU per request (PostgreSQL only)
  --peers       --floor with Platformatic DB and PostGraphile beside the floor, on the same rows
                with their own JWT authorization (PostgreSQL only; install them first with
                npm ci --prefix bench/peers)
  --rounds N    rotated rounds of the service and the floor (and the peers) at each size,
                --duration seconds each; default 3 (5 with --floor or --peers)
  --memory      only the server's memory at start: peak and settled RSS of a first start on an
                empty PGlite folder, a later start, and the same on PostgreSQL (about a minute;
                the default run measures them first too, --quick and --baseline do not)
  --runs N      repeat every scenario N times (same server process) and report medians; default 1
  --duration S  seconds per scenario; default 10 (5 with --quick)
  --sizes LIST  payment-table sizes to seed, ascending; default 10000,1000000 (PGlite: 10000)
  --no-build    reuse dist/ instead of running npm run build first
  --out FILE    where the JSON figures go; default bench/results/latest.json (latest-quick.json with
                --quick, latest-memory.json with --memory, latest-floor.json with --floor,
                latest-peers.json with --peers)
  --own-postgres  start a throwaway PostgreSQL cluster with the benchmark's settings (shared_buffers
                that holds the 1M-row table, ...) from this machine's binaries; DATABASE_URL is ignored
  --pool N      database pool size of the service (DATABASE_POOL_MAX) and of the naive server;
                default 10, the service's own default
  --accept-encoding VALUE  send Accept-Encoding: VALUE (e.g. gzip, br) with the service's list
                requests; by default none is sent and answers are not compressed
Runs against PostgreSQL when DATABASE_URL is set (a throwaway database is created on that server
and dropped at the end), otherwise against PGlite in a temporary directory.`;

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): BenchOptions {
  let quick = false;
  let baselineOnly = false;
  let memoryOnly = false;
  let floorOnly = false;
  let peers = false;
  let floorRounds: number | undefined;
  let runs = 1;
  let duration: number | undefined;
  let sizes: number[] | undefined;
  let build = true;
  let out: string | undefined;
  let ownPostgres = false;
  let poolMax: number | undefined;
  let acceptEncoding: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) fail(`${arg} needs a value`);
      return v;
    };
    switch (arg) {
      case '--quick':
        quick = true;
        break;
      case '--baseline':
        baselineOnly = true;
        break;
      case '--memory':
        memoryOnly = true;
        break;
      case '--floor':
        floorOnly = true;
        break;
      case '--peers':
        peers = true;
        floorOnly = true;
        break;
      case '--rounds':
        floorRounds = positiveInt(value(), arg, 99);
        break;
      case '--runs':
        runs = positiveInt(value(), arg, 9);
        break;
      case '--duration':
        duration = positiveInt(value(), arg, 300);
        break;
      case '--sizes':
        sizes = value()
          .split(',')
          .map((s) => positiveInt(s.replace(/_/g, ''), arg, 20_000_000));
        break;
      case '--no-build':
        build = false;
        break;
      case '--out':
        out = value();
        break;
      case '--pool':
        poolMax = positiveInt(value(), arg, 500);
        break;
      case '--accept-encoding':
        acceptEncoding = value();
        if (!/^[A-Za-z0-9*,;=. -]{1,100}$/.test(acceptEncoding)) fail(`${arg} must be a header value such as "gzip" or "br, gzip"`);
        break;
      case '--own-postgres':
        ownPostgres = true;
        break;
      case '-h':
      case '--help':
        process.stdout.write(`${USAGE}\n`);
        process.exit(0);
        break;
      default:
        fail(`unknown option ${arg}`);
    }
  }
  const databaseUrl = ownPostgres ? undefined : env.DATABASE_URL || undefined;
  if (databaseUrl) {
    const host = new URL(databaseUrl).hostname;
    // Every load this harness generates (pgbench included) stays on this machine.
    if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) {
      fail(`DATABASE_URL must point at 127.0.0.1/localhost (got ${host}): the benchmark only loads the loopback interface`);
    }
  }
  const defaultSizes = quick || !(databaseUrl || ownPostgres) ? [10_000] : [10_000, 1_000_000];
  const chosenSizes = [...new Set(sizes ?? defaultSizes)].sort((a, b) => a - b);
  if ([memoryOnly, baselineOnly, floorOnly].filter(Boolean).length > 1) fail('--memory, --baseline and --floor are separate runs');
  if (floorOnly && !(databaseUrl || ownPostgres)) fail(`${peers ? '--peers' : '--floor'} needs PostgreSQL: DATABASE_URL or --own-postgres`);
  return {
    quick,
    baselineOnly,
    memoryOnly,
    floorOnly,
    peers,
    floorRounds: floorRounds ?? (floorOnly ? 5 : 3),
    runs,
    durationSeconds: duration ?? (quick ? 5 : 10),
    warmupSeconds: quick ? 2 : 3,
    sizes: chosenSizes,
    build,
    out: out ?? `${BENCH_DIR}results/${memoryOnly ? 'latest-memory' : peers ? 'latest-peers' : floorOnly ? 'latest-floor' : quick ? 'latest-quick' : 'latest'}.json`,
    databaseUrl,
    ownPostgres,
    poolMax: poolMax ?? 10,
    acceptEncoding,
  };
}

function positiveInt(text: string, name: string, max: number, usage = USAGE, min = 1): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min || n > max) fail(`${name} must be an integer from ${min} to ${max}`, usage);
  return n;
}

function fail(message: string, usage = USAGE): never {
  process.stderr.write(`${message}\n${usage}\n`);
  process.exit(2);
}

// `npm run bench -- --webhooks` (bench/webhooks.ts): what delivering costs the API.
export interface WebhookBenchOptions {
  quick: boolean;
  // Pairs of payment-recording windows, without and with two active subscriptions, their order
  // alternated; the ratio is their median.
  rounds: number;
  durationSeconds: number;
  // Events in the backlog drained to the local receiver.
  backlog: number;
  // Stations in the reconnect storm measured without and with subscriptions (0: no storm).
  storm: number;
  build: boolean;
  out: string;
  databaseUrl: string | undefined;
}

const WEBHOOK_USAGE = `usage: npm run bench -- --webhooks [--quick] [--rounds N] [--duration SECONDS] [--backlog N] [--storm N] [--no-build] [--out FILE]
  --quick       1 round of 5 s, a backlog of 10,000, a storm of 200
  --rounds N    pairs of payment-recording windows, none and two subscriptions, alternated; default 5
  --duration S  seconds per recording window; default 10
  --backlog N   events in the backlog drained to the local receiver; default 100,000
  --storm N     stations in the reconnect storm, without and with two subscriptions; default 2,000, 0 for none
  --no-build    reuse dist/ instead of running npm run build first
  --out FILE    default bench/results/webhooks-latest.json (webhooks-quick.json with --quick)
Runs against PostgreSQL when DATABASE_URL is set (a throwaway database on that server, dropped at
the end and on Ctrl-C), otherwise against PGlite in a temporary directory.`;

export function parseWebhookOptions(argv: string[], env: NodeJS.ProcessEnv): WebhookBenchOptions {
  const quick = argv.includes('--quick');
  const options: WebhookBenchOptions = {
    quick,
    rounds: quick ? 1 : 5,
    durationSeconds: quick ? 5 : 10,
    backlog: quick ? 10_000 : 100_000,
    storm: quick ? 200 : 2000,
    build: true,
    out: `${BENCH_DIR}results/webhooks-${quick ? 'quick' : 'latest'}.json`,
    databaseUrl: env.DATABASE_URL || undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => argv[++i] ?? fail(`${arg} needs a value`, WEBHOOK_USAGE);
    if (arg === '--webhooks' || arg === '--quick') continue;
    else if (arg === '--rounds') options.rounds = positiveInt(value(), arg, 20, WEBHOOK_USAGE);
    else if (arg === '--duration') options.durationSeconds = positiveInt(value(), arg, 300, WEBHOOK_USAGE);
    else if (arg === '--backlog') options.backlog = positiveInt(value().replace(/_/g, ''), arg, 1_000_000, WEBHOOK_USAGE);
    else if (arg === '--storm') options.storm = positiveInt(value().replace(/_/g, ''), arg, 10_000, WEBHOOK_USAGE, 0);
    else if (arg === '--no-build') options.build = false;
    else if (arg === '--out') options.out = value();
    else fail(`unknown option ${arg}`, WEBHOOK_USAGE);
  }
  if (options.databaseUrl && !['127.0.0.1', 'localhost', '::1', '[::1]'].includes(new URL(options.databaseUrl).hostname)) {
    fail('DATABASE_URL must point at 127.0.0.1/localhost: the benchmark only loads the loopback interface', WEBHOOK_USAGE);
  }
  return options;
}
