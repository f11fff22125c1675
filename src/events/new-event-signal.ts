// This process's delivery workers are told that events were appended, so they look for them soon
// instead of at their next poll. The signal may come before the appending transaction commits: a
// worker that finds nothing then looks again at its next poll, which is short (delivery-worker.ts).

type Listener = () => void;

const listeners = new Set<Listener>();

export function signalNewEvents(): void {
  for (const listener of listeners) listener();
}

// Returns the unsubscribe function.
export function onNewEvents(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
