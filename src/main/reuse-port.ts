// The listen options that give a socket SO_REUSEPORT, on every Node the service runs on, so that
// several listening sockets can share the port (listeners.ts). Node sets the option itself from
// listen's `reusePort` since 22.12 and 23.1 (the Docker image runs Node 24). Older Nodes (20)
// ignore `reusePort`: there the socket is made and bound with the option by node-unix-socket (a
// native addon shipped prebuilt in its npm packages) and listened on by its file descriptor.
// Without either (a platform the addon has no build for, a host name rather than an address) the
// options ask for nothing, and the port keeps one socket.
import { isIP, type ListenOptions, type Server as NetServer } from 'node:net';

const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
const nodeSetsReusePort = major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);

// Loaded on first use, only where Node cannot set the option itself; null where it cannot load.
let addon: Promise<((port: number, host: string) => number) | null> | undefined;
function reuseportAddon() {
  addon ??= import('node-unix-socket/js/socket.js').then(
    (socketModule) => socketModule.createReuseportFd,
    () => null,
  );
  return addon;
}

export interface PortOptions {
  host: string;
  port: number;
  backlog: number;
}

// The options for `server`'s next listen (its own, or Fastify's listen for the app's server) that
// bind the socket with SO_REUSEPORT. With the addon the socket is bound here, at once: a port in
// use throws (with EADDRINUSE's message) before anything listens. Node reads the backlog of a
// listen on a file descriptor only from its second argument, never from the options (which are
// all Fastify passes): `server`'s listen is made to move it there.
export async function reusePortListen(server: NetServer, options: PortOptions): Promise<ListenOptions | { fd: number; host: string }> {
  if (nodeSetsReusePort) return { ...options, reusePort: true } as ListenOptions;
  const create = isIP(options.host) === 0 ? null : await reuseportAddon();
  if (!create) return options;
  const fd = create(options.port, options.host);
  const listen = server.listen;
  server.listen = function (this: NetServer, ...args: unknown[]) {
    server.listen = listen;
    return (listen as (...a: unknown[]) => NetServer).call(this, args[0], options.backlog, ...args.slice(1));
  } as NetServer['listen'];
  return { fd, host: options.host };
}
