// The webhooks bench's receiver, on 127.0.0.1: answers every delivery 204 at once and counts them
// per subscription (the last segment of the path names it) and per webhook-id, so a duplicate
// beyond at-least-once retries would show.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LOOPBACK } from './processes.js';

export interface Receiver {
  url(name: string): string;
  // Distinct webhook-ids received for the subscription, and deliveries in all (retries included).
  distinct(name: string): number;
  received(name: string): number;
  // performance.now() of the latest delivery.
  lastAt(): number;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const ids = new Map<string, Set<string>>();
  const counts = new Map<string, number>();
  let last = 0;
  const server = http.createServer((req, res) => {
    const name = (req.url ?? '/').split('/').pop() ?? '';
    const id = String(req.headers['webhook-id'] ?? '');
    req.resume();
    req.on('end', () => {
      let seen = ids.get(name);
      if (!seen) ids.set(name, (seen = new Set()));
      seen.add(id);
      counts.set(name, (counts.get(name) ?? 0) + 1);
      last = performance.now();
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (name) => `http://${LOOPBACK}:${port}/hooks/${name}`,
    distinct: (name) => ids.get(name)?.size ?? 0,
    received: (name) => counts.get(name) ?? 0,
    lastAt: () => last,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
