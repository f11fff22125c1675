// The webhook client against real receivers on this machine: answers that fail, hang, come slowly,
// redirect or never end, and targets that are or resolve to private addresses. A guard around
// Node's net.connect and tls.connect records every connection the client asks for and refuses any
// whose address is not loopback, so a fault in the rules could never send a packet off the machine.
import http from 'node:http';
import net, { type AddressInfo, isIP } from 'node:net';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createWebhookClient, type WebhookClient } from '../../src/events/webhook-client.js';
import { checkTargetUrl, type ResolveHost } from '../../src/events/target-rules.js';

const isLoopback = (address: string) => /^(127\.|::1$|::ffff:127\.|::ffff:7f)/.test(address);

// Every host the client asked to connect to, in order.
const connections: string[] = [];

type Connect = (this: unknown, options: object, ...rest: unknown[]) => unknown;

function guard(original: Connect): Connect {
  return function (this: unknown, options: object, ...rest: unknown[]) {
    const host = String((options as { host?: string }).host);
    connections.push(host);
    if (isIP(host) !== 0 && !isLoopback(host)) throw new Error(`test guard: no connection to ${host}`);
    const lookup = (options as { lookup?: net.LookupFunction }).lookup;
    const checked: net.LookupFunction | undefined =
      lookup &&
      ((hostname, lookupOptions, callback) =>
        lookup(hostname, lookupOptions, (error, address, family) => {
          const answers = typeof address === 'string' ? [address] : address.map((entry) => entry.address);
          if (error === null && answers.some((answer) => !isLoopback(answer))) callback(new Error('test guard: a resolved address is not loopback'), '', 0);
          else callback(error, address, family);
        }));
    return original.call(this, checked ? { ...options, lookup: checked } : options, ...rest);
  };
}

beforeAll(() => {
  const [netConnect, tlsConnect] = [net.connect.bind(net) as Connect, tls.connect.bind(tls) as Connect];
  vi.spyOn(net, 'connect').mockImplementation(guard(netConnect) as never);
  vi.spyOn(tls, 'connect').mockImplementation(guard(tlsConnect) as never);
});
afterAll(() => vi.restoreAllMocks());

type Receiver = { url: string; port: number; requests: { path: string; body: string; headers: http.IncomingHttpHeaders }[]; sockets: net.Socket[]; close(): Promise<void> };

// A receiver on `host` that answers each path as `routes` says (204 for a path it does not know).
async function startReceiver(routes: Record<string, (req: http.IncomingMessage, res: http.ServerResponse) => void>, host = '127.0.0.1'): Promise<Receiver> {
  const requests: Receiver['requests'] = [];
  const sockets: net.Socket[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      requests.push({ path: req.url ?? '', body, headers: req.headers });
      const route = routes[req.url ?? ''];
      if (route) route(req, res);
      else res.writeHead(204).end();
    });
  });
  server.on('connection', (socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    port,
    requests,
    sockets,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const closed = (socket: net.Socket) => new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));

function resolverOf(names: Record<string, string>): ResolveHost {
  return async (hostname) => {
    const address = names[hostname];
    if (address === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return [{ address, family: address.includes(':') ? 6 : 4 }];
  };
}

const EVENT = { network: 'net_client', headers: { 'content-type': 'application/json', 'webhook-id': 'evt_1' }, body: '{"type":"webhook.test","data":{}}' };

const clients: WebhookClient[] = [];
const receivers: Receiver[] = [];
function client(options: Parameters<typeof createWebhookClient>[0]): WebhookClient {
  const made = createWebhookClient(options);
  clients.push(made);
  return made;
}
async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const made = await startReceiver(...args);
  receivers.push(made);
  return made;
}
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((made) => made.close()));
  await Promise.all(clients.splice(0).map((made) => made.close()));
  connections.length = 0;
});

describe('webhook client: answers', () => {
  it('delivers the body and headers as given, and is ok for a 2xx only', async () => {
    const target = await receiver({ '/fail': (_req, res) => res.writeHead(500).end('no'), '/created': (_req, res) => res.writeHead(201).end() });
    const webhooks = client({ allowPrivateTargets: true });
    expect(await webhooks.send({ url: `${target.url}/in?key=1`, ...EVENT })).toMatchObject({ ok: true, status: 204 });
    expect(await webhooks.send({ url: `${target.url}/created`, ...EVENT })).toMatchObject({ ok: true, status: 201 });
    const failed = await webhooks.send({ url: `${target.url}/fail`, ...EVENT });
    expect(failed).toMatchObject({ ok: false, status: 500 });
    expect(failed.error).toBeUndefined();
    expect(target.requests[0]).toMatchObject({ path: '/in?key=1', body: EVENT.body, headers: { 'webhook-id': 'evt_1', 'content-type': 'application/json' } });
    expect(target.requests).toHaveLength(3);
  });

  it('cuts an attempt whose receiver never answers at the time limit, and closes its connection', async () => {
    const target = await receiver({ '/hang': () => undefined });
    const outcome = await client({ allowPrivateTargets: true, timeoutMs: 300 }).send({ url: `${target.url}/hang`, ...EVENT });
    expect(outcome).toMatchObject({ ok: false, error: 'no complete answer within 300 ms' });
    expect(outcome.status).toBeUndefined();
    expect(outcome.durationMs).toBeGreaterThanOrEqual(295);
    await closed(target.sockets[0]!);
  });

  it('counts the answer body in the time limit: headers in time and a body that never ends is cut', async () => {
    const target = await receiver({
      '/trickle': (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('a');
      },
    });
    const outcome = await client({ allowPrivateTargets: true, timeoutMs: 300 }).send({ url: `${target.url}/trickle`, ...EVENT });
    expect(outcome).toMatchObject({ ok: false, status: 200, error: 'no complete answer within 300 ms' });
    await closed(target.sockets[0]!);
  });

  it('takes an answer that comes slowly within the time limit', async () => {
    const target = await receiver({ '/slow': (_req, res) => setTimeout(() => res.writeHead(200).end('{"ok":true}'), 250) });
    const outcome = await client({ allowPrivateTargets: true, timeoutMs: 5_000 }).send({ url: `${target.url}/slow`, ...EVENT });
    expect(outcome).toMatchObject({ ok: true, status: 200 });
    expect(outcome.durationMs).toBeGreaterThanOrEqual(245);
  });

  it('takes an informational answer (103) for what it is: the final status counts, and one that never comes leaves no status', async () => {
    const target = await receiver({
      '/hints-then-ok': (_req, res) => {
        res.writeEarlyHints({ link: '</style.css>; rel=preload' });
        res.writeHead(204).end();
      },
      '/hints-then-nothing': (_req, res) => res.writeEarlyHints({ link: '</style.css>; rel=preload' }),
    });
    const webhooks = client({ allowPrivateTargets: true, timeoutMs: 300 });
    expect(await webhooks.send({ url: `${target.url}/hints-then-ok`, ...EVENT })).toMatchObject({ ok: true, status: 204 });
    const cut = await webhooks.send({ url: `${target.url}/hints-then-nothing`, ...EVENT });
    expect(cut).toMatchObject({ ok: false, error: 'no complete answer within 300 ms' });
    expect(cut.status).toBeUndefined();
  });

  it('does not follow a redirect: the 3xx fails the attempt and its target is never called', async () => {
    const target = await receiver({
      '/moved': (_req, res) => res.writeHead(302, { location: '/elsewhere' }).end(),
      '/permanent': (_req, res) => res.writeHead(308, { location: '/elsewhere' }).end(),
    });
    const webhooks = client({ allowPrivateTargets: true });
    expect(await webhooks.send({ url: `${target.url}/moved`, ...EVENT })).toMatchObject({ ok: false, status: 302, error: 'redirects are not followed' });
    expect(await webhooks.send({ url: `${target.url}/permanent`, ...EVENT })).toMatchObject({ ok: false, status: 308 });
    expect(target.requests.map((request) => request.path)).toEqual(['/moved', '/permanent']);
  });

  it('reads an answer up to the cap and drops the rest: an answer that never ends still succeeds', async () => {
    let written = 0;
    const target = await receiver({
      '/endless': (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const chunk = Buffer.alloc(16 * 1024, 120);
        const pump = () => {
          let more = true;
          while (!res.destroyed && more) {
            more = res.write(chunk);
            written += chunk.length;
          }
          if (!res.destroyed) res.once('drain', pump);
        };
        pump();
      },
    });
    const outcome = await client({ allowPrivateTargets: true, timeoutMs: 10_000, maxAnswerBytes: 64 * 1024 }).send({ url: `${target.url}/endless`, ...EVENT });
    expect(outcome).toMatchObject({ ok: true, status: 200 });
    // The receiver wrote at least the cap before the client dropped the connection.
    await closed(target.sockets[0]!);
    expect(written).toBeGreaterThanOrEqual(64 * 1024);
  });

  it('keeps the connections of the networks that delivered most recently: a network pushed out has its connection closed once its attempt in flight is answered', async () => {
    let answerSlow: (() => void) | undefined;
    const target = await receiver({
      '/slow': (_req, res) => {
        answerSlow = () => res.writeHead(204).end();
      },
    });
    const webhooks = client({ allowPrivateTargets: true, maxAgents: 2 });
    const send = (network: string, path = '/in') => webhooks.send({ ...EVENT, network, url: `${target.url}${path}` });
    // net_a's attempt is in flight when two other networks push its connections out.
    const slow = send('net_a', '/slow');
    await vi.waitFor(() => expect(answerSlow).toBeDefined(), { timeout: 5_000 });
    expect(await send('net_b')).toMatchObject({ ok: true });
    expect(await send('net_c')).toMatchObject({ ok: true });
    expect(target.sockets).toHaveLength(3);
    answerSlow!();
    expect(await slow).toMatchObject({ ok: true, status: 204 });
    // Its next delivery, once an answered connection would be back in its pool and well within the
    // 4 s a kept connection idles, opens a connection anew, and the old one is closed.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await send('net_a')).toMatchObject({ ok: true });
    expect(target.sockets).toHaveLength(4);
    await closed(target.sockets[0]!);
    // net_a came back and pushed net_b out; net_c, delivered to since, keeps its connection.
    await closed(target.sockets[1]!);
    expect(await send('net_c')).toMatchObject({ ok: true });
    expect(target.sockets).toHaveLength(4);
  });

  it('says when nothing listens', async () => {
    const target = await receiver({});
    const url = `${target.url}/in`;
    await target.close();
    expect(await client({ allowPrivateTargets: true }).send({ url, ...EVENT })).toMatchObject({ ok: false, error: 'connection refused' });
  });
});

describe('webhook client: targets', () => {
  it('refuses http and loopback names without the allowance, connecting to nothing', async () => {
    const target = await receiver({});
    const webhooks = client({ allowPrivateTargets: false });
    expect(await webhooks.send({ url: `${target.url}/in`, ...EVENT })).toMatchObject({ ok: false, error: 'refused: the URL must use https' });
    expect(await webhooks.send({ url: `https://localhost:${target.port}/in`, ...EVENT })).toMatchObject({
      ok: false,
      error: 'refused: the host name localhost resolves to a loopback address',
    });
    expect(target.sockets).toHaveLength(0);
  });

  it('a name that does not resolve, or whose resolver fails, is a failed attempt that says so, not a refused target', async () => {
    const failing: ResolveHost = (hostname) =>
      hostname === 'nowhere.test' ? resolverOf({})(hostname) : Promise.reject(Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }));
    const webhooks = client({ allowPrivateTargets: true, resolve: failing });
    expect(await webhooks.send({ url: 'https://nowhere.test/in', ...EVENT })).toMatchObject({ ok: false, error: 'the host name nowhere.test does not resolve' });
    expect(await webhooks.send({ url: 'https://flaky.test/in', ...EVENT })).toMatchObject({ ok: false, error: 'the host name flaky.test could not be resolved (EAI_AGAIN)' });
  });

  it('an attempt whose lookup never answers fails as a lookup that ran out of time', async () => {
    const silent: ResolveHost = () => new Promise(() => undefined);
    const webhooks = client({ allowPrivateTargets: true, resolve: silent, timeoutMs: 800 });
    expect(await webhooks.send({ url: 'https://silent.test/in', ...EVENT })).toMatchObject({ ok: false, error: 'the host name silent.test could not be resolved in time' });
  });

  it('refuses a name resolving to 127.0.0.1 or a private address without the allowance, and delivers to 127.0.0.2 with it', async () => {
    const target = await receiver({}, '127.0.0.2');
    const resolve = resolverOf({ 'hooks.test': '127.0.0.1', 'intranet.test': '10.1.2.3', 'second.test': '127.0.0.2' });
    const strict = client({ allowPrivateTargets: false, resolve });
    expect(await strict.send({ url: `https://hooks.test:${target.port}/in`, ...EVENT })).toMatchObject({
      ok: false,
      error: 'refused: the host name hooks.test resolves to a loopback address',
    });
    expect(await strict.send({ url: `https://intranet.test:${target.port}/in`, ...EVENT })).toMatchObject({
      ok: false,
      error: 'refused: the host name intranet.test resolves to a private address',
    });
    expect(target.sockets).toHaveLength(0);
    const allowed = client({ allowPrivateTargets: true, resolve });
    expect(await allowed.send({ url: `http://second.test:${target.port}/in`, ...EVENT })).toMatchObject({ ok: true, status: 204 });
    expect(target.requests).toHaveLength(1);
    // The guard saw each connection the client asked for (and so would have stopped any other).
    expect(connections).toEqual(['hooks.test', 'intranet.test', 'second.test']);
  });

  it('refuses an IPv4-mapped loopback literal without the allowance, and delivers to it with', async () => {
    const target = await receiver({});
    const strict = client({ allowPrivateTargets: false });
    expect(await strict.send({ url: `https://[::ffff:127.0.0.1]:${target.port}/in`, ...EVENT })).toMatchObject({
      ok: false,
      error: "refused: the URL's host is an IPv4-mapped IPv6 address",
    });
    expect(connections).toEqual([]);
    expect(await client({ allowPrivateTargets: true }).send({ url: `http://[::ffff:127.0.0.1]:${target.port}/in`, ...EVENT })).toMatchObject({ ok: true });
  });

  it('refuses the metadata address 169.254.169.254 with or without the allowance, without connecting', async () => {
    for (const allowPrivateTargets of [false, true]) {
      const outcome = await client({ allowPrivateTargets }).send({ url: `${allowPrivateTargets ? 'http' : 'https'}://169.254.169.254/latest/meta-data/`, ...EVENT });
      expect(outcome).toMatchObject({ ok: false, error: "refused: the URL's host is a cloud metadata address" });
    }
    const viaName = client({ allowPrivateTargets: true, resolve: resolverOf({ 'metadata.test': '169.254.169.254' }) });
    expect(await viaName.send({ url: 'http://metadata.test/latest', ...EVENT })).toMatchObject({
      ok: false,
      error: 'refused: the host name metadata.test resolves to a cloud metadata address',
    });
    expect(connections.filter((host) => host.startsWith('169.254'))).toEqual([]);
  });

  it('checks the address when it connects: a name that passed the check and then resolves to loopback is refused (DNS rebinding)', async () => {
    const target = await receiver({});
    let answers = 0;
    const rebinding: ResolveHost = async () => [{ address: answers++ === 0 ? '93.184.215.14' : '127.0.0.1', family: 4 }];
    expect(await checkTargetUrl(`https://rebind.test:${target.port}/in`, { allowPrivateTargets: false, resolve: rebinding })).toEqual({ ok: true });
    const outcome = await client({ allowPrivateTargets: false, resolve: rebinding }).send({ url: `https://rebind.test:${target.port}/in`, ...EVENT });
    expect(outcome).toMatchObject({ ok: false, error: 'refused: the host name rebind.test resolves to a loopback address' });
    expect(answers).toBe(2);
    expect(target.sockets).toHaveLength(0);
  });
});
