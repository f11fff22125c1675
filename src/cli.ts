import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type AppConfig } from './config.js';
import { localBaseUrl } from './cli-command.js';
import { openDatabase } from './db/database.js';
import { ClientInputError, createClient, listClients, revokeClient } from './auth/clients-service.js';
import { parseScopeList } from './auth/scopes.js';
import { seedDemoData } from './cli/demo-data.js';
import { runStationCommand, STATION_USAGE, StationInputError } from './stations/station-cli.js';

const USAGE = `usage:
  cli clients create --name NAME --scopes "read:sessionpayment write:asset" [--network ID] [--admin]
  cli clients list
  cli clients revoke CLIENT_ID
  cli demo-data            record demo session payments (skips sessions that already have one)
${STATION_USAGE}`;

type Command = (args: string[], db: Awaited<ReturnType<typeof openDatabase>>['db'], config: AppConfig) => Promise<number>;

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
    await seedDemoData(db, undefined, { baseUrl: localBaseUrl(config.host, config.port) });
    return 0;
  },
};

export async function runCli(argv: string[]): Promise<number> {
  // Talks to a running service over the network: no configuration, no database.
  if (argv[0] === 'station') return runStationCommand(argv.slice(1));
  const key = argv.slice(0, 2).join(' ');
  const single = argv[0] ?? '';
  const [name, rest] = commands[key] ? [key, argv.slice(2)] : commands[single] ? [single, argv.slice(1)] : [undefined, []];
  if (!name) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const config = loadConfig();
  const database = await openDatabase({ url: config.database.url, poolMax: 2, dataDir: config.database.dataDir, holder: 'cli' });
  try {
    await database.withStartupLock(async () => undefined);
    return await commands[name]!(rest, database.db, config);
  } finally {
    await database.close();
  }
}

runCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof ClientInputError || error instanceof ConfigError || error instanceof StationInputError) {
      process.stderr.write(`${error.message}\n${USAGE}\n`);
      process.exit(2);
    }
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
