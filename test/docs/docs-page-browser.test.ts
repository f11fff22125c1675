// The /docs page in a real headless browser (Debian's chromium driven by playwright-core) against a
// real service process: "Authorize" with client credentials typed into the dialog, then "Try it
// out" on the session-payments list. Without a browser this test fails: .ci/run installs one.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, expect, it } from 'vitest';
import { killProcess, runProcess, startService } from '../helpers/service-process.js';

const CHROMIUM = '/usr/bin/chromium';

const folders: string[] = [];
function folder(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  folders.push(dir);
  return dir;
}

let service: Awaited<ReturnType<typeof startService>> | undefined;
let context: BrowserContext | undefined;
afterAll(async () => {
  await context?.close();
  await killProcess(service?.child);
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

it('the /docs page, opened on 127.0.0.1, authorizes with client credentials and lists session payments with a 200', { timeout: 120_000 }, async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: this test needs Debian's chromium (apt-get install -y chromium; .ci/run does it)`);

  // The embedded database admits one process at a time: the client is made before the server starts.
  const dataDir = folder('cns-docs-data-');
  const created = await runProcess(['src/cli.ts', 'clients', 'create', '--name', 'docs-page', '--scopes', 'read:sessionpayment'], { DATA_DIR: dataDir });
  expect(created.code, created.stderr).toBe(0);
  const clientId = /client_id:\s+(\S+)/.exec(created.stdout)![1]!;
  const clientSecret = /client_secret:\s+(\S+)/.exec(created.stdout)![1]!;
  service = await startService({ DATA_DIR: dataDir });

  // Playwright adds --headless itself; a fresh profile per run (the user data dir).
  context = await chromium.launchPersistentContext(folder('cns-docs-profile-'), {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const tokenRequests: string[] = [];
  page.on('request', (request) => {
    if (request.url().endsWith('/oauth/token')) tokenRequests.push(request.url());
  });

  await page.goto(`${service.base}/docs`);
  await page.locator('.auth-wrapper .authorize').click();
  const dialog = page.locator('.modal-ux');
  await dialog.locator('#client_id_clientCredentials').fill(clientId);
  await dialog.locator('#client_secret_clientCredentials').fill(clientSecret);
  await dialog.locator('.auth-container', { has: page.locator('#client_id_clientCredentials') }).locator('button.authorize').click();
  // Authorized: the dialog offers to log out instead.
  await dialog.locator('h6', { hasText: 'Authorized' }).waitFor();
  await dialog.locator('button', { hasText: 'Logout' }).waitFor();
  expect(tokenRequests).toEqual([`${service.base}/oauth/token`]);
  await dialog.locator('.close-modal').click();

  const list = page.locator('#operations-payments-listSessionPayments');
  await list.locator('.opblock-summary').click();
  await list.locator('.try-out__btn').click();
  await list.locator('button.execute').click();
  const status = list.locator('.live-responses-table tr.response .response-col_status');
  await status.waitFor();
  expect((await status.innerText()).trim()).toBe('200');
  // The request the page made carried the token it obtained.
  expect(await list.locator('.curl-command').innerText()).toMatch(/Authorization: Bearer [\w-]+\.[\w-]+\.[\w-]+/);
});
