// Waiting for what a test asserts, not racing a clock. A test that asserts an event (a log line, a
// row written by a batch, a socket closed) polls until it holds, for as long as the test itself
// may run: on a loaded machine the event comes late, and late is no failure. vi.waitFor's own
// default (1 s) is such a race. A bound that is the thing tested is no wait: it is measured
// against a baseline of the same test, or on an injected clock.
import { vi } from 'vitest';
import { getCurrentTest } from 'vitest/suite';

// Left of the test's timeout, so a condition that never holds fails with its own assertion, not
// as a timed-out test.
const MARGIN_MS = 1000;

// What is left of the running test's timeout (vitest.config.ts, or the test's own).
function leftOfTestTimeout(): number {
  const test = getCurrentTest();
  const timeout = test?.timeout ?? 0;
  const started = test?.result?.startTime ?? Date.now();
  return Math.max(MARGIN_MS, started + timeout - MARGIN_MS - Date.now());
}

// Resolves with what `check` returns once it no longer throws.
export function eventually<T>(check: () => T | Promise<T>, intervalMs = 20): Promise<T> {
  return vi.waitFor(check, { timeout: leftOfTestTimeout(), interval: intervalMs });
}
