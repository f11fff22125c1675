import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type AppConfig } from '../../kernel/config.js';
import { clientBaseUrl } from './printed-commands.js';
import { openDatabase } from '../../db/database.js';
import { ClientInputError, createClient, listClients, revokeClient } from '../../auth/clients-service.js';
import { parseScopeList } from '../../auth/scopes.js';
import { seedDemoData } from './demo-data.js';
import { runStationCommand, STATION_USAGE, StationInputError } from './station-command.js';

type Command = (args: string[], db: Awaited<ReturnType<typeof openDatabase>>['db'], config: AppConfig) => Promise<number>;

// Each command's own usage; the general usage is theirs together.
const USAGES: Record<string, string> = {
  'clients create': `  cli clients create --name NAME --scopes "read:sessionpayment write:asset" [--network ID] [--admin]
                           make an API client; prints its id and secret once (--network: its tokens
                           see one network only; --admin: may manage the station model catalogue)`,
  'clients list': '  cli clients list         the API clients, revoked ones included (never a secret)',
  'clients revoke': '  cli clients revoke CLIENT_ID\n                           refuse the client new tokens; its tokens stop working within 30 s',
  'demo-data': `  cli demo-data            record demo session payments (skips sessions that already have one) and
                           print commands that list them (the embedded database: stop the server first)`,
  station: STATION_USAGE,
};

function usageOf(prefix: string): string {
  const lines = Object.entries(USAGES)
    .filter(([name]) => prefix === '' || name === prefix || name.startsWith(`${prefix} `))
    .map(([, usage]) => usage);
  return `usage (run from the project folder; in the Docker image: node dist/cli.js …):\n${lines.join('\n')}`;
}

const HELP = new Set(['--help', '-h', 'help']);

class UsageError extends Error {
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

const commands: Record<string, Command> = {
  'clients create': async (args, db) => {
    const { values } = parseArgs({
      args,
      options: { name: { type: 'string' }, scopes: { type: 'string' }, network: { type: 'string' }, admin: { type: 'boolean' } },
    });
    if (!values.name || !values.scopes) throw new ClientInputError('--name and --scopes are required');
    const client = await createClient(db, {
      name: values.name,
      scopes: parseScopeList(values.scopes),
      network: values.network,
      isAdmin: values.admin ?? false,
    });
    process.stdout.write(
      `client created; the secret is shown only this once\n  client_id:     ${client.clientId}\n  client_secret: ${client.clientSecret}\n  scopes:        ${client.scopes.join(' ')}\n  network:       ${client.network ?? '(all networks)'}\n  admin:         ${client.isAdmin}\n`,
    );
    return 0;
  },
  'clients list': async (_args, db) => {
    process.stdout.write(`${JSON.stringify(await listClients(db), null, 2)}\n`);
    return 0;
  },
  'clients revoke': async (args, db) => {
    const id = args[0];
    if (!id) throw new ClientInputError('revoke needs a client id');
    if (!(await revokeClient(db, id))) {
      process.stderr.write(`no active client ${id}\n`);
      return 1;
    }
    process.stdout.write(
      `client ${id} revoked: it gets no new tokens, and the servers refuse the tokens it already holds within AUTH_REVOCATION_REFRESH_SECONDS (default 10 s, at most 30 s)\n`,
    );
    return 0;
  },
  'demo-data': async (_args, db, config) => {
    await seedDemoData(db, undefined, { baseUrl: clientBaseUrl(config, config.port) });
    return 0;
  },
};

export async function runCli(argv: string[]): Promise<number> {
  if (argv.length === 0) throw new UsageError('no command given', usageOf(''));
  if (HELP.has(argv[0]!)) return help('');
  const key = argv.slice(0, 2).join(' ');
  const single = argv[0]!;
  const name = USAGES[key] ? key : USAGES[single] ? single : undefined;
  const rest = argv.slice(name === key ? 2 : 1);
  // A group's name alone (`clients --help`) shows the group's commands.
  if (!name && Object.keys(USAGES).some((command) => command.startsWith(`${single} `))) {
    if (argv.slice(1).some((arg) => HELP.has(arg))) return help(single);
    throw new UsageError(argv.length > 1 ? `unknown command "${key}"` : `"${single}" needs a subcommand`, usageOf(single));
  }
  if (!name) throw new UsageError(`unknown command "${single}"`, usageOf(''));
  // Help never needs the configuration, nor takes the database.
  if (rest.some((arg) => HELP.has(arg))) return help(name);
  // Talks to a running service over the network: no configuration, no database.
  if (name === 'station') return runStationCommand(rest);
  const config = loadConfig();
  const database = await openDatabase({ url: config.database.url, directUrl: config.database.directUrl, password: config.database.password, poolMax: 2, dataDir: config.database.dataDir, holder: 'cli' });
  try {
    await database.migrate();
    return await commands[name]!(rest, database.db, config);
  } finally {
    await database.close();
  }
}

function help(prefix: string): number {
  process.stdout.write(`${usageOf(prefix)}\n`);
  return 0;
}

// Mistakes in the command line (exit 2, with the usage that applies) against failures (exit 1).
function usageProblem(error: unknown): UsageError | null {
  if (error instanceof UsageError) return error;
  if (error instanceof ClientInputError || error instanceof StationInputError || error instanceof ConfigError) {
    return new UsageError(error.message, usageOf(''));
  }
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) return new UsageError((error as Error).message, usageOf(''));
  return null;
}

runCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const usage = usageProblem(error);
    if (usage) {
      process.stderr.write(`${usage.message}\n${usage.usage}\n`);
      process.exit(2);
    }
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
