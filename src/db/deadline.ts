import { ServiceUnavailableError } from '../kernel/errors.js';

// /readyz must answer within 2 s; this leaves room for the rest of the request.
export const PING_TIMEOUT_MS = 1500;

export function ignore(): void {}

// What a request gets when the database sent nothing in time (a deadline of ours, or the guard
// in silent-connections.ts): a 503 counted as a timeout.
export function databaseTimedOut(ms: number): ServiceUnavailableError {
  return new ServiceUnavailableError(`The database did not answer within ${ms} ms`, { timedOut: true });
}

// Rejects when the promise has not settled in time; the work itself is left to finish (or fail)
// on its own, its outcome ignored.
export async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(databaseTimedOut(ms)), ms);
  });
  work.catch(ignore);
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
