import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import { Agent } from 'undici';
import { guardedConnector, TargetRefusedError } from './guarded-connector.js';
import { checkTargetUrlForm, type TargetUrlVerdict } from './target-addresses.js';
import type { ResolveHost } from './target-rules.js';

// The HTTP client that delivers webhooks (docs/events.md, "Targets" and "Delivery and retries"): one POST an
// attempt, to a target the rules allow (checked as each connection is made, guarded-connector.ts),
// redirects never followed (a 3xx fails the attempt), the answer read up to a cap and dropped, the
// whole attempt (connection, headers, body) cut at a time limit. `ok` only for a 2xx. It never
// throws: a failure is a status, or an error text that names no secret (no URL, no header), or both.

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_ANSWER_BYTES = 64 * 1024;
const MAX_KEPT_FORMS = 1_000;

export type WebhookRequest = { url: string; headers: Record<string, string>; body: string };
export type WebhookOutcome = { ok: boolean; status?: number; error?: string; durationMs: number };

export type WebhookClient = {
  send(request: WebhookRequest): Promise<WebhookOutcome>;
  // Waits for the attempts in flight (each ends within the time limit), then closes the connections.
  close(): Promise<void>;
};

export type WebhookClientOptions = {
  // WEBHOOKS_ALLOW_PRIVATE_TARGETS: http URLs and private addresses allowed.
  allowPrivateTargets: boolean;
  timeoutMs?: number;
  maxAnswerBytes?: number;
  // The resolver of host names; the system's by default (tests pass their own).
  resolve?: ResolveHost;
};

class AttemptTimeout extends Error {}

// Reads the answer until it ends or `cap` bytes have come, then drops the rest (and so the
// connection, when the answer was longer).
async function drain(body: Readable, cap: number): Promise<void> {
  let read = 0;
  for await (const chunk of body) {
    read += (chunk as Buffer).length;
    if (read >= cap) break;
  }
  if (!body.readableEnded) body.destroy();
}

function describe(error: unknown, timeoutMs: number, timedOut: boolean): string {
  if (timedOut) return `no complete answer within ${timeoutMs} ms`;
  if (error instanceof TargetRefusedError) return `refused: ${error.message}`;
  const { code, message } = error as NodeJS.ErrnoException;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
    case 'UND_ERR_SOCKET':
      return 'connection closed by the receiver';
    case 'ENOTFOUND':
      return message;
    case 'UND_ERR_CONNECT_TIMEOUT':
      return `no connection within ${timeoutMs} ms`;
    default:
      return code === undefined ? message.slice(0, 200) : `${code}: ${message.slice(0, 200)}`;
  }
}

export function createWebhookClient(options: WebhookClientOptions): WebhookClient {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxAnswerBytes = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  const agent = new Agent({
    connect: guardedConnector({ allowPrivateTargets: options.allowPrivateTargets, timeoutMs, resolve: options.resolve }),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });

  // The form's verdict of each URL, kept: the rules are pure, and parsing the URL and its host on
  // every attempt cost half as much CPU as the request itself. Bounded by the URLs a replica's
  // attempts in flight could use at once.
  const forms = new LRUCache<string, TargetUrlVerdict>({ max: MAX_KEPT_FORMS });
  const formOf = (url: string): TargetUrlVerdict => {
    let form = forms.get(url);
    if (!form) {
      form = checkTargetUrlForm(url, options);
      forms.set(url, form);
    }
    return form;
  };

  async function send(request: WebhookRequest): Promise<WebhookOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const form = formOf(request.url);
    if (!form.ok) return { ok: false, error: `refused: ${form.reason}`, durationMs: elapsed() };
    const { url } = form;
    const attempt = new AbortController();
    const timer = setTimeout(() => attempt.abort(new AttemptTimeout()), timeoutMs);
    let status: number | undefined;
    try {
      const answer = await agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: request.headers,
        body: request.body,
        signal: attempt.signal,
      });
      status = answer.statusCode;
      await drain(answer.body, maxAnswerBytes);
      if (status >= 200 && status < 300) return { ok: true, status, durationMs: elapsed() };
      // Any other status speaks for itself; a redirect is said not to be followed.
      if (status >= 300 && status < 400) return { ok: false, status, error: 'redirects are not followed', durationMs: elapsed() };
      return { ok: false, status, durationMs: elapsed() };
    } catch (error) {
      const failure = describe(error, timeoutMs, attempt.signal.aborted);
      return { ok: false, ...(status === undefined ? {} : { status }), error: failure, durationMs: elapsed() };
    } finally {
      clearTimeout(timer);
    }
  }

  return { send, close: () => agent.close() };
}
