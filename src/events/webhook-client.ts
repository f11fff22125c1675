import { LRUCache } from 'lru-cache';
import { Agent, type Dispatcher } from 'undici';
import { guardedConnector, TargetRefusedError, TargetUnresolvedError } from './guarded-connector.js';
import { checkTargetUrlForm, type TargetUrlVerdict } from './target-addresses.js';
import { networkKey, targetLookups, type TargetLookups } from './target-lookups.js';
import { resolveWithSystem, type ResolveHost } from './target-rules.js';

// The HTTP client that delivers webhooks (docs/events.md, "Targets" and "Delivery and retries"): one POST an
// attempt, to a target the rules allow (checked as each connection is made, guarded-connector.ts),
// redirects never followed (a 3xx fails the attempt), the answer read up to a cap and dropped, the
// whole attempt (connection, headers, body) cut at a time limit. `ok` only for a 2xx. It never
// throws: a failure is a status, or an error text that names no secret (no URL, no header), or both.

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_ANSWER_BYTES = 64 * 1024;
const MAX_KEPT_FORMS = 1_000;
const MAX_AGENTS = 256;
const LOOKUP_MARGIN_MS = 500;

// `network`: the subscription's (null: one without a network), whose turn its connection's lookup
// takes (target-lookups.ts).
export type WebhookRequest = { url: string; network: string | null; headers: Record<string, string>; body: string };
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
  // The replica's lookups (webhooks-plugin.ts); without them, lookups of its own through `resolve`
  // (the system's resolver by default; tests pass their own).
  lookups?: TargetLookups;
  resolve?: ResolveHost;
  // The networks whose connections are kept (tests make it small).
  maxAgents?: number;
};

class AttemptTimeout extends Error {}
// The answer reached the cap: the rest is dropped with the connection; the status stands.
class AnswerCapped extends Error {}

function describe(error: unknown, timeoutMs: number, timedOut: boolean): string {
  if (timedOut) return `no complete answer within ${timeoutMs} ms`;
  if (error instanceof TargetRefusedError) return `refused: ${error.message}`;
  if (error instanceof TargetUnresolvedError) return error.message;
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
  const lookups = options.lookups ?? targetLookups(options.resolve ?? resolveWithSystem);
  // A connection's lookup gives up a little before the attempt's and the connection's own time
  // limits, so that an attempt whose lookup waited it out says so rather than only that time ran out.
  const lookupWaitMs = Math.max(1, timeoutMs - LOOKUP_MARGIN_MS);
  // One agent a network, whose connections' lookups take that network's turns: a lookup hook sees
  // only the host name, and a name may be any network's. A connection is kept by the network
  // that made it. The agents of the networks that delivered least recently are closed beyond
  // MAX_AGENTS (their attempts in flight finish first); an agent kept idle holds no connection
  // once undici's keep-alive has closed them, so nothing is timed per attempt to close it sooner.
  const closing = new Set<Promise<void>>();
  const agents = new LRUCache<string, Agent>({
    max: options.maxAgents ?? MAX_AGENTS,
    dispose: (agent) => {
      const closed = agent.close().catch(() => undefined);
      closing.add(closed);
      void closed.finally(() => closing.delete(closed));
    },
  });
  const agentOf = (network: string | null): Agent => {
    const key = networkKey(network);
    let agent = agents.get(key);
    if (!agent) {
      agent = new Agent({
        connect: guardedConnector({ allowPrivateTargets: options.allowPrivateTargets, timeoutMs, resolve: lookups.forDeliveries(network, lookupWaitMs) }),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      agents.set(key, agent);
    }
    return agent;
  };

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

  // One attempt through undici's dispatch rather than request(): an answer is counted and dropped
  // as it comes, with no stream, no async iterator and no AbortController built for it
  // (docs/performance.md, "Webhooks").
  function send(request: WebhookRequest): Promise<WebhookOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const form = formOf(request.url);
    if (!form.ok) return Promise.resolve({ ok: false, error: `refused: ${form.reason}`, durationMs: elapsed() });
    const { url } = form;
    return new Promise<WebhookOutcome>((resolve) => {
      let status: number | undefined;
      let read = 0;
      let timedOut = false;
      let settled = false;
      let controller: Dispatcher.DispatchController | null = null;
      const timer = setTimeout(() => {
        timedOut = true;
        // Before the request has a connection there is nothing to abort yet: it is aborted as
        // soon as it gets one, and a connection still being made ends at the same limit.
        controller?.abort(new AttemptTimeout());
      }, timeoutMs);
      const settle = (outcome: Omit<WebhookOutcome, 'durationMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ ...outcome, durationMs: elapsed() });
      };
      const answered = (code: number) => {
        if (code >= 200 && code < 300) return settle({ ok: true, status: code });
        // Any other status speaks for itself; a redirect is said not to be followed.
        if (code >= 300 && code < 400) return settle({ ok: false, status: code, error: 'redirects are not followed' });
        return settle({ ok: false, status: code });
      };
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(current) {
          controller = current;
          if (timedOut) current.abort(new AttemptTimeout());
        },
        onResponseStart(_current, code) {
          // An informational answer (1xx) is not the answer.
          if (code >= 200) status = code;
        },
        onResponseData(current, chunk) {
          read += chunk.length;
          if (read >= maxAnswerBytes) current.abort(new AnswerCapped());
        },
        onResponseEnd() {
          answered(status!);
        },
        onResponseError(_current, error) {
          if (error instanceof AnswerCapped && status !== undefined) return answered(status);
          settle({ ok: false, ...(status === undefined ? {} : { status }), error: describe(error, timeoutMs, timedOut) });
        },
      };
      try {
        agentOf(request.network).dispatch({ origin: url.origin, path: `${url.pathname}${url.search}`, method: 'POST', headers: request.headers, body: request.body }, handler);
      } catch (error) {
        settle({ ok: false, error: describe(error, timeoutMs, false) });
      }
    });
  }

  return {
    send,
    close: async () => {
      agents.clear();
      await Promise.all(closing);
    },
  };
}
