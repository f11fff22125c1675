import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

// A TCP proxy in front of a PostgreSQL server (or a pooler) that can stop carrying bytes, in both
// directions, without closing anything: a network that stopped delivering, or a server that
// stopped answering. Frozen, it reads nothing more from either side (what they send waits in the
// kernel's buffers) and holds what it had read; resumed, it delivers all of it in order.
export interface FreezingProxy {
  // `target` with the proxy's address in place of the server's
  url: string;
  freeze(): void;
  resume(): void;
  close(): Promise<void>;
}

export async function startFreezingProxy(target: string): Promise<FreezingProxy> {
  const upstream = new URL(target);
  const sockets = new Set<Socket>();
  const held: { to: Socket; chunk: Buffer }[] = [];
  let frozen = false;

  function forward(from: Socket, to: Socket): void {
    sockets.add(from);
    if (frozen) from.pause();
    from.on('data', (chunk: Buffer) => {
      if (!frozen) return void to.write(chunk);
      from.pause();
      held.push({ to, chunk });
    });
    from.on('end', () => to.end());
    // a reset or an error on one side ends the other; 'close' follows either way
    from.on('error', () => undefined);
    from.on('close', () => {
      sockets.delete(from);
      to.destroy();
    });
  }

  const server = createServer((client) => {
    const server = connect(Number(upstream.port || 5432), upstream.hostname);
    forward(client, server);
    forward(server, client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const proxied = new URL(target);
  proxied.hostname = '127.0.0.1';
  proxied.port = String((server.address() as AddressInfo).port);

  return {
    url: proxied.toString(),
    freeze() {
      frozen = true;
      for (const socket of sockets) socket.pause();
    },
    resume() {
      frozen = false;
      for (const { to, chunk } of held.splice(0)) if (!to.destroyed) to.write(chunk);
      for (const socket of sockets) socket.resume();
    },
    async close() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
