import { buildApp } from './app.js';
import type { CreatedClient } from '../auth/clients-service.js';
import { ConfigError, loadConfig, type AppConfig } from '../kernel/config.js';
import { runServer, type ListenerOf } from './listeners.js';
import { clientBaseUrl, cliCommand, listCommand, tokenCommand } from './cli/printed-commands.js';

function printBootstrap(client: CreatedClient, address: string, config: AppConfig) {
  const base = clientBaseUrl(config, Number(new URL(address).port));
  // Printed to the console once, deliberately not through the logger: logs are shipped and kept.
  const lines = [
    '',
    'Bootstrap admin client created. The secret is shown only this once; store it now.',
    `  client_id:     ${client.clientId}`,
    `  client_secret: ${client.clientSecret}`,
    '',
    'Get an access token and call the API with it:',
    `  ${tokenCommand(base, client.clientId, client.clientSecret)}`,
    `  ${listCommand(base, ['ses_1'])}`,
    '',
    // The embedded database admits one process at a time: the CLI cannot run beside the server.
    config.database.url ? '' : `The embedded database is empty. To load sample payments, stop the server, then run: ${cliCommand()} demo-data`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

async function main() {
  let config: AppConfig;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const app = await buildApp(config);
  let address: string;
  try {
    address = await runServer(app, config);
  } catch (error) {
    // Let go of the database (and the embedded database's folder) before exiting.
    await app.close().catch(() => undefined);
    throw listenProblem(error, config);
  }
  const client = await app.auth.createBootstrapClient();
  if (client) printBootstrap(client, address, config);
}

// The operator's mistakes in HOST, PORT and OCPP_TLS_PORT, as one line naming the variable.
function listenProblem(error: unknown, config: AppConfig): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  const { variable, port } = (error as { listener?: ListenerOf }).listener ?? { variable: 'PORT', port: config.port };
  const where = `${config.host}:${port}`;
  if (code === 'EADDRINUSE') return new Error(`${where} is already in use (another process listens there): stop it, or set ${variable}`);
  if (code === 'EACCES') return new Error(`${where} needs privileges this process lacks: set ${variable} above 1023`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') {
    return new Error(`HOST ${config.host} is not an address of this machine (${code}): set HOST to one of its addresses, 127.0.0.1 or 0.0.0.0`);
  }
  return error;
}

main().catch((error: unknown) => {
  process.stderr.write(`failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
