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
  const app = await buildApp(config, { bootstrap: true });
  const address = await runServer(app, config);
  if (app.auth.bootstrapClient) printBootstrap(app.auth.bootstrapClient, address, config);
}

main().catch((error: unknown) => {
  process.stderr.write(`failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
