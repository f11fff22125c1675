// `cli station …`: plays a charging station against a running service, over the network only
// (no database), so a new user can watch a station come online in the asset read.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { connectStation, OcppCallError, type OcppProtocol } from './ocpp-adapter.js';

export const STATION_USAGE = `  cli station --id ASSET_ID --password PASSWORD [--url ws://127.0.0.1:3000/ocpp] [--ocpp 2.0.1|1.6]
              [--ca CERT.pem] [--heartbeat SECONDS] [--heartbeats N] [--hex-text]
                           connect as a charging station, boot, heartbeat, print what the service asks
                           (the password may come from STATION_PASSWORD instead)`;

export class StationInputError extends Error {}

// What the service asks may carry a new password: shown as its length only.
function printable(params: unknown): string {
  return JSON.stringify(params, (key, value: unknown) =>
    /pass|key|secret|attributeValue|^value$/i.test(key) && typeof value === 'string' ? `[${value.length} characters hidden]` : value,
  );
}

// An OCPP 2.0.1 password may start with "-" (a generated one does now and then), which parseArgs
// would take for an option: the word after --password is always its value.
function passwordAsValue(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--password' && i + 1 < args.length) out.push(`--password=${args[++i]}`);
    else out.push(args[i]!);
  }
  return out;
}

export async function runStationCommand(args: string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<number> {
  const { values } = parseArgs({
    args: passwordAsValue(args),
    options: {
      id: { type: 'string' },
      password: { type: 'string' },
      url: { type: 'string', default: 'ws://127.0.0.1:3000/ocpp' },
      ocpp: { type: 'string', default: '2.0.1' },
      ca: { type: 'string' },
      heartbeat: { type: 'string' },
      heartbeats: { type: 'string' },
      'hex-text': { type: 'boolean', default: false },
    },
  });
  const password = values.password ?? process.env.STATION_PASSWORD;
  if (!values.id || !password) throw new StationInputError('--id and --password (or STATION_PASSWORD) are required');
  if (values.ocpp !== '2.0.1' && values.ocpp !== '1.6') throw new StationInputError('--ocpp must be 2.0.1 or 1.6');
  const v16 = values.ocpp === '1.6';
  if (v16 && !/^(?:[0-9A-Fa-f]{2}){16,20}$/.test(password)) throw new StationInputError('an OCPP 1.6 password is 32 to 40 hex digits');
  const protocol: OcppProtocol = v16 ? 'ocpp1.6' : 'ocpp2.0.1';
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
