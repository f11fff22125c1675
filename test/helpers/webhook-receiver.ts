import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedWebhook {
  headers: IncomingHttpHeaders;
  body: string;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedWebhook[];
  // The status the next requests are answered with (default 204).
  answerWith(status: number): void;
  // While on, requests get no answer: a receiver that hangs. Turning it off answers the held ones.
  hang(on: boolean): void;
  // Requests waiting for an answer now.
  hanging(): number;
  // Answers the longest-held request, if any; false when none was held.
  answerOne(): boolean;
  // Resolves once `count` requests arrived in all (a guard of `timeoutMs` keeps a broken test from hanging).
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

// A real HTTP receiver on 127.0.0.1, as a subscriber runs one.
export async function startReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  let status = 204;
  let hangs = false;
  const held = new Set<ServerResponse>();
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (hangs) {
        held.add(res);
        // Answered, or the client gave up (its time limit).
        res.on('close', () => held.delete(res));
      } else {
        res.statusCode = status;
        res.end();
      }
      for (const waiter of waiters.filter((w) => received.length >= w.count)) waiter.resolve();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    answerWith(next) {
      status = next;
    },
    hang(on) {
      hangs = on;
      if (!on) for (const res of held) res.writeHead(status).end();
    },
    hanging: () => held.size,
    answerOne() {
      const [first] = held;
      if (!first) return false;
      held.delete(first);
      first.writeHead(status).end();
      return true;
    },
    async waitFor(count, timeoutMs = 20_000) {
      if (received.length < count) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`the receiver got ${received.length} of ${count} requests`)), timeoutMs);
          waiters.push({
            count,
            resolve: () => {
              clearTimeout(timer);
              resolve();
            },
          });
        });
      }
      return received;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

// Verifies a delivery as a subscriber does, with the reference library; returns the parsed body.
export function verified(secret: string, webhook: ReceivedWebhook): { type: string; timestamp: string; data: unknown } {
  const headers = {
    'webhook-id': String(webhook.headers['webhook-id']),
    'webhook-timestamp': String(webhook.headers['webhook-timestamp']),
    'webhook-signature': String(webhook.headers['webhook-signature']),
  };
  return new Webhook(secret).verify(webhook.body, headers) as { type: string; timestamp: string; data: unknown };
}
