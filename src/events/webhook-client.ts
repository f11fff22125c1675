// Sends one webhook attempt. Provisional: fetch with the 10 s limit, no redirects followed, until
// the client that checks every connection's address takes its place.
export interface WebhookClient {
  send(request: { url: string; headers: Record<string, string>; body: string }): Promise<{ ok: boolean; status?: number; error?: string; durationMs: number }>;
  close(): Promise<void>;
}

export function createWebhookClient(_options: { allowPrivateTargets: boolean }): WebhookClient {
  return {
    async send({ url, headers, body }) {
      const started = performance.now();
      try {
        const res = await fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal: AbortSignal.timeout(10_000) });
        await res.body?.cancel();
        return { ok: res.status >= 200 && res.status < 300, status: res.status, durationMs: Math.round(performance.now() - started) };
      } catch (error) {
        return { ok: false, error: error instanceof Error ? error.message : String(error), durationMs: Math.round(performance.now() - started) };
      }
    },
    close: () => Promise.resolve(),
  };
}
