// The stations of a replica that is about to stop are asked to reconnect: through the load
// balancer, which has taken this replica out by then, they reach one that is not stopping.
import type { StationSocket } from './ocpp/ocpp-adapter.js';

// 1012 "Service Restart" in the WebSocket close code registry: the server is going away and the
// client should connect again. ocpp-rpc's client reconnects after any close it did not ask for
// (after its back-off, 1 s ± 25 %); the code says to other firmware what the close means.
export const RECONNECT_CLOSE = { code: 1012, reason: 'Service restarting: reconnect' } as const;

// Starts the closing handshake on every socket and resolves once all of them have closed, or after
// waitMs (a station that never answers is cut off when the endpoint closes). Returns how many.
export async function askToReconnect(sockets: Iterable<StationSocket<unknown>>, waitMs: number): Promise<number> {
  const list = [...sockets];
  const closed = list.map((socket) => new Promise<void>((resolve) => socket.onClose(resolve)));
  for (const socket of list) socket.close(RECONNECT_CLOSE.code, RECONNECT_CLOSE.reason);
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(closed), new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
  clearTimeout(timer);
  return list.length;
}
