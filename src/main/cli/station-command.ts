// `cli station …`: plays a charging station against a running service, over the network only
// (no database), so a new user can watch a station come online in the asset read.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { Writable, type Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { passwordProblem } from '../../asset-management/station-credentials-service.js';
import { OCPP_1_6, OCPP_2_0_1, OCPP_VERSIONS, subprotocolOf } from '../../kernel/ocpp-vocabulary.js';
import { connectStation, OcppCallError } from '../../stations/ocpp/ocpp-adapter.js';

export const STATION_USAGE = `  cli station --id ASSET_ID [--url ws://127.0.0.1:3000/ocpp] [--ocpp 2.0.1|1.6]
              [--ca CERT.pem] [--heartbeat SECONDS] [--heartbeats N] [--hex-text]
                           connect as a charging station, boot, heartbeat, print what the service asks.
                           The password comes from STATION_PASSWORD, or else from standard input (asked
                           for without echo on a terminal); never from the command line, where every
                           user of the machine sees it (ps) and npm prints it`;

export class StationInputError extends Error {}

const NO_PASSWORD_OPTION =
  '--password is not accepted: a password on the command line is seen by every user of the machine and printed by npm; set STATION_PASSWORD or give it on standard input';

// What the service asks may carry a new password: shown as its length only.
function printable(params: unknown): string {
  return JSON.stringify(params, (key, value: unknown) =>
    /pass|key|secret|attributeValue|^value$/i.test(key) && typeof value === 'string' ? `[${value.length} characters hidden]` : value,
  );
}

export interface StationInput {
  env?: NodeJS.ProcessEnv;
  stdin?: Readable & { isTTY?: boolean };
  // where a terminal's prompt goes
  prompt?: Writable;
}

// The first line of standard input: piped (`… | cli station`), or typed at a terminal that does
// not echo it.
async function readPasswordLine(stdin: Readable & { isTTY?: boolean }, prompt: Writable): Promise<string | undefined> {
  const terminal = stdin.isTTY === true;
  let echo = true;
  const output = new Writable({
    write(chunk, _encoding, done) {
      if (echo) prompt.write(chunk);
      done();
    },
  });
  const lines = createInterface({ input: stdin, output, terminal });
  // Ctrl-C at the prompt (the terminal is raw while readline reads): no password.
  lines.on('SIGINT', () => lines.close());
  try {
    if (terminal) {
      prompt.write('station password: ');
      echo = false;
    }
    for await (const line of lines) return line;
    return undefined;
  } finally {
    lines.close();
    if (terminal) prompt.write('\n');
  }
}

export async function runStationCommand(
  args: string[],
  out: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
  input: StationInput = {},
): Promise<number> {
  if (args.some((arg) => arg === '--password' || arg.startsWith('--password='))) throw new StationInputError(NO_PASSWORD_OPTION);
  const { values } = parseArgs({
    args,
    options: {
      id: { type: 'string' },
      url: { type: 'string', default: 'ws://127.0.0.1:3000/ocpp' },
      ocpp: { type: 'string', default: OCPP_2_0_1 },
      ca: { type: 'string' },
      heartbeat: { type: 'string' },
      heartbeats: { type: 'string' },
      'hex-text': { type: 'boolean', default: false },
    },
  });
  if (!values.id) throw new StationInputError('--id is required');
  const version = OCPP_VERSIONS.find((v) => v === values.ocpp);
  if (version === undefined) throw new StationInputError('--ocpp must be 2.0.1 or 1.6');
  const password = (input.env ?? process.env).STATION_PASSWORD || (await readPasswordLine(input.stdin ?? process.stdin, input.prompt ?? process.stderr));
  if (!password) throw new StationInputError('no password: set STATION_PASSWORD, or give the password on standard input');
  const v16 = version === OCPP_1_6;
  if (v16 && passwordProblem(version, password) !== null) throw new StationInputError('an OCPP 1.6 password is 32 to 40 hex digits');
  const protocol = subprotocolOf(version);
  const limit = values.heartbeats !== undefined ? Number(values.heartbeats) : Infinity;

  const station = await connectStation({
    url: values.url,
    identity: values.id,
    protocol,
    // OCPP-J 1.6 §6.2.2: the key's raw bytes; --hex-text sends the text, as many stations do.
    password: v16 && !values['hex-text'] ? Buffer.from(password, 'hex') : password,
    ca: values.ca ? readFileSync(values.ca) : undefined,
  }).catch((error: unknown) => {
    const status = (error as { code?: unknown }).code;
    throw new Error(
      typeof status === 'number'
        ? `the service refused the connection with HTTP ${status}${status === 401 ? ' (wrong password, or a security profile this connection does not meet)' : status === 404 ? ' (no asset with this id)' : ''}`
        : `could not connect to ${values.url}: ${(error as Error).message}`,
    );
  });
  out(`connected to ${values.url}/${values.id} (${station.protocol})`);

  let stopping = false;
  const closed = new Promise<number>((resolve) =>
    station.onClose((code) => {
      if (!stopping) out(`the service closed the connection (code ${code})`);
      resolve(stopping ? 0 : 1);
    }),
  );
  station.handleAny((method, params) => {
    out(`<- ${method} ${printable(params)}`);
    throw new OcppCallError('NotImplemented', `this station does not handle ${method}`);
  });
  const stop = () => {
    stopping = true;
    void station.close();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);

  const boot = (await station.call(
    'BootNotification',
    v16
      ? { chargePointVendor: 'cns', chargePointModel: 'cli-station', firmwareVersion: '1.0.0' }
      : { reason: 'PowerUp', chargingStation: { vendorName: 'cns', model: 'cli-station', firmwareVersion: '1.0.0' } },
  )) as { status: string; interval: number };
  out(`-> BootNotification: ${JSON.stringify(boot)}`);
  const intervalSeconds = values.heartbeat !== undefined ? Number(values.heartbeat) : boot.interval;

  let sent = 0;
  const beat = async () => {
    if (stopping) return;
    try {
      out(`-> Heartbeat: ${JSON.stringify(await station.call('Heartbeat', {}))}`);
    } catch (error) {
      out(`heartbeat failed: ${(error as Error).message}`);
    }
    if (++sent >= limit) stop();
  };
  await beat();
  const timer = setInterval(() => void beat(), Math.max(1, intervalSeconds) * 1000);
  const code = await closed;
  clearInterval(timer);
  process.off('SIGINT', stop);
  process.off('SIGTERM', stop);
  return code;
}
