import { buildApp } from './app.js';
import type { CreatedClient } from './auth/clients-service.js';
import { ConfigError, loadConfig, type AppConfig } from './config.js';
import { runServer } from './lifecycle.js';

function printBootstrap(client: CreatedClient, address: string, config: AppConfig) {
  const base = address.replace('://0.0.0.0', '://127.0.0.1').replace('://[::]', '://127.0.0.1');
  // Printed to the console once, deliberately not through the logger: logs are shipped and kept.
  const lines = [
    '',
    'Bootstrap admin client created. The secret is shown only this once; store it now.',
    `  client_id:     ${client.clientId}`,
    `  client_secret: ${client.clientSecret}`,
    '',
    'Get an access token:',
    `  curl -s -u '${client.clientId}:${client.clientSecret}' -d grant_type=client_credentials ${base}/oauth/token`,
    '',
    'Then call the API with it, for example:',
    `  curl -s -H "Authorization: Bearer $TOKEN" '${base}/payments/v1/session-payments?sessionIds=ses_1'`,
    '',
    config.database.url ? '' : 'The embedded database is empty. Load sample payments with: npm run cli -- demo-data',
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

// The operator's mistakes in HOST and PORT, as one line naming the variable.
function listenProblem(error: unknown, config: AppConfig): unknown {
  const code = (error as NodeJS.ErrnoException).code;
  const where = `${config.host}:${config.port}`;
  if (code === 'EADDRINUSE') return new Error(`${where} is already in use (another process listens there): stop it, or set PORT`);
  if (code === 'EACCES') return new Error(`${where} needs privileges this process lacks: set PORT above 1023`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME') {
    return new Error(`HOST ${config.host} is not an address of this machine (${code}): set HOST to one of its addresses, 127.0.0.1 or 0.0.0.0`);
  }
  return error;
}

main().catch((error: unknown) => {
  process.stderr.write(`failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
