// The files an operator runs the service with: no Docker engine here, so they are read, not run.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../src/kernel/config.js';

const ROOT = new URL('../../', import.meta.url);
const read = (file: string) => readFileSync(new URL(file, ROOT), 'utf8');

describe('deployment files', () => {
  it('the TLS keys the README has you make in the project folder are never committed', () => {
    const check = spawnSync('git', ['check-ignore', '--no-index', 'ocpp-key.pem', 'ocpp-cert.pem'], { cwd: ROOT, encoding: 'utf8' });
    expect(check.stdout.split('\n').filter(Boolean)).toEqual(['ocpp-key.pem', 'ocpp-cert.pem']);
  });

  it('the image keeps the embedded database in a volume, declared after the folder is given to its user', () => {
    const lines = read('Dockerfile').split('\n');
    const finalStage = lines.slice(lines.findLastIndex((l) => l.startsWith('FROM ')));
    expect(finalStage.join('\n')).toMatch(/^ENV [\s\S]*DATA_DIR=\/app\/data/m);
    const chown = finalStage.findIndex((l) => /chown node:node \/app\/data/.test(l));
    const volume = finalStage.findIndex((l) => /^VOLUME \[?"?\/app\/data"?\]?$/.test(l));
    expect(chown).toBeGreaterThanOrEqual(0);
    expect(volume).toBeGreaterThan(chown);
  });

  it('compose refuses an empty or missing POSTGRES_PASSWORD before any container starts', () => {
    expect(read('docker-compose.yml')).toMatch(/^x-[a-z-]+: "\$\{POSTGRES_PASSWORD:\?[^}]+\}"$/m);
  });

  it('no README example puts a station password on the command line', () => {
    const stationCommands = read('README.md')
      .split('\n')
      .filter((l) => /cli(?:\.js)? -* ?station\b/.test(l));
    expect(stationCommands.length).toBeGreaterThan(0);
    for (const line of stationCommands) expect(line).not.toMatch(/--password/);
  });

  type Service = { image?: string; build?: string; profiles?: string[]; volumes?: string[]; environment?: Record<string, unknown>; depends_on?: unknown; stop_grace_period?: string };
  // `merge`: compose reads YAML's merge keys (`<<: *service-environment`).
  const compose = parseYaml(read('docker-compose.yml'), { maxAliasCount: 100, merge: true }) as { services: Record<string, Service> };
  const replicas = ['api1', 'api2', 'api3'];
  // "${NAME:-default}", nested ones too, as compose reads it with the .env given (NAME unset or
  // empty: the default).
  const resolved = (value: unknown, dotenv: Record<string, string> = {}) => {
    let text = String(value);
    for (let before = ''; before !== text; ) {
      before = text;
      text = text.replace(/\$\{([A-Z_]+):-([^${}]*)\}/, (_m, name: string, fallback: string) => dotenv[name] || fallback);
    }
    return text;
  };
  // A container's environment as the service reads it, with the .env given; the secret file exists
  // only in the container, and the image's ENV applies where compose sets nothing.
  const imageEnv = (name: string) => new RegExp(`^ENV [\\s\\S]*?\\b${name}=(\\d+)`, 'm').exec(read('Dockerfile'))?.[1];
  const containerEnv = (service: string, dotenv: Record<string, string> = {}) => {
    const { DATABASE_PASSWORD_FILE: _secret, ...env } = Object.fromEntries(Object.entries(compose.services[service]!.environment!).map(([k, v]) => [k, resolved(v, dotenv)]));
    return { PORT: imageEnv('PORT')!, SHUTDOWN_TIMEOUT_MS: imageEnv('SHUTDOWN_TIMEOUT_MS')!, ...env };
  };

  it('compose passes every service variable of .env on to each api container, but what the container or the image sets', () => {
    // The service's variables: every NAME= line of .env.example outside its docker compose section.
    const sections = read('.env.example').split(/^# --- /m);
    const named = (text: string) => [...text.matchAll(/^#? ?([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]!);
    const serviceVariables = sections.filter((section) => !section.startsWith('docker compose')).flatMap(named);
    expect(serviceVariables).toContain('WEBHOOKS_ALLOW_PRIVATE_TARGETS');
    // Set by each container for itself, fixed by the image, or carried by the secret file.
    const setByContainer = ['DATABASE_URL', 'DATABASE_DIRECT_URL', 'DATABASE_PASSWORD_FILE', 'PUBLIC_URL', 'TRUST_PROXY', 'SHUTDOWN_DRAIN_SECONDS'];
    const setByImage = ['NODE_ENV', 'HOST', 'PORT', 'DATA_DIR'];
    // haproxy terminates TLS for the replicas, which mount no certificate.
    const tls = ['OCPP_TLS_PORT', 'OCPP_TLS_CERT_FILE', 'OCPP_TLS_KEY_FILE'];
    for (const name of ['api', ...replicas]) {
      const env = compose.services[name]!.environment!;
      for (const variable of serviceVariables) {
        if (setByImage.includes(variable) || variable === 'DATABASE_PASSWORD') expect(env, `${name}: ${variable}`).not.toHaveProperty(variable);
        else if (replicas.includes(name) && tls.includes(variable)) expect(env[variable], `${name}: ${variable}`).toBe('');
        else if (!setByContainer.includes(variable)) expect(String(env[variable]), `${name}: ${variable}`).toMatch(new RegExp(`^\\$\\{${variable}:-[^}]*\\}$`));
      }
      // With nothing set in .env, the forwarded variables arrive empty and are read as unset.
      expect(() => loadConfig(containerEnv(name)), name).not.toThrow();
      // A line of .env reaches the service.
      expect(loadConfig(containerEnv(name, { RATE_LIMIT_MAX: '77', WEBHOOKS_ALLOW_PRIVATE_TARGETS: 'true' })), name).toMatchObject({
        rateLimit: { max: 77 },
        webhooks: { allowPrivateTargets: true },
      });
      // An external provider without its issuer stops the service, naming AUTH_ISSUER: compose's
      // address of the service is never taken for the provider's iss.
      expect(() => loadConfig(containerEnv(name, { AUTH_JWKS_URL: 'https://idp.example.com/jwks.json' })), name).toThrow(/^invalid configuration: AUTH_ISSUER:/);
      const external = loadConfig(containerEnv(name, { AUTH_JWKS_URL: 'https://idp.example.com/jwks.json', AUTH_ISSUER: 'https://idp.example.com/' }));
      expect(external.auth, name).toMatchObject({ mode: 'external', issuer: 'https://idp.example.com/' });
      // The address clients use, from .env: the embedded issuer's iss.
      expect(loadConfig(containerEnv(name, { PUBLIC_URL: 'https://cns.example' })).auth.issuer, name).toBe('https://cns.example');
    }
    // The embedded issuer signs with the address clients use: the published port's, the balancer's.
    expect(loadConfig(containerEnv('api', { API_PORT: '3100' })).auth.issuer).toBe('http://localhost:3100');
    expect(loadConfig(containerEnv('api1', { BALANCER_PORT: '8181' })).auth.issuer).toBe('http://localhost:8181');
    // A certificate set in .env is api's; the replicas start without it.
    const certificate = { OCPP_TLS_PORT: '3443', OCPP_TLS_CERT_FILE: '/certs/ocpp-cert.pem', OCPP_TLS_KEY_FILE: '/certs/ocpp-key.pem' };
    expect(containerEnv('api', certificate)).toMatchObject(certificate);
    for (const name of replicas) expect(loadConfig(containerEnv(name, certificate)).ocpp.tls, name).toBeUndefined();
  });

  describe('the compose profile "replicas" runs the files the balancer tests run', () => {
    const haproxyCfg = read('deploy/haproxy/haproxy.cfg');

    it('haproxy: the repository\'s configuration where the image reads it, the certificate folder where it names it, a server per replica', () => {
      const haproxy = compose.services.haproxy!;
      expect(haproxy.profiles).toEqual(['replicas']);
      expect(haproxy.image).toMatch(/^haproxy:2\.6\b/);
      expect(haproxy.volumes).toEqual(['./deploy/haproxy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro', './deploy/haproxy/certs:/etc/haproxy/certs:ro']);
      expect(haproxyCfg).toMatch(/^\s*bind :8443 ssl crt \/etc\/haproxy\/certs\/cns\.pem$/m);
      const servers = [...haproxyCfg.matchAll(/^\s*server (\S+) (\S+)/gm)].map((m) => `${m[1]} ${m[2]}`);
      expect(servers).toEqual([...replicas, ...replicas].map((name) => `${name} ${name}:3000`));
      expect(haproxy.depends_on).toEqual(replicas);
    });

    it('the replicas: through PgBouncer (its listening port) with the server for what needs a session, X-Forwarded-* trusted, nothing published', () => {
      const pgbouncerPort = /^listen_port = (\d+)$/m.exec(read('deploy/pgbouncer/pgbouncer.ini'))?.[1];
      for (const name of replicas) {
        const replica = compose.services[name]!;
        expect(replica).toMatchObject({ build: '.', profiles: ['replicas'] });
        expect(replica).not.toHaveProperty('ports');
        const env = Object.fromEntries(Object.entries(replica.environment!).map(([k, v]) => [k, resolved(v)]));
        expect(env).toMatchObject({ DATABASE_URL: `postgres://cns@pgbouncer:${pgbouncerPort}/cns`, DATABASE_DIRECT_URL: 'postgres://cns@db:5432/cns', TRUST_PROXY: 'true' });
        expect(env.DATABASE_PASSWORD_FILE).toBe('/run/secrets/db_password');
        expect(loadConfig(containerEnv(name))).toMatchObject({ trustProxy: true, shutdownDrainMs: 5000, shutdownTimeoutMs: 8000 });
      }
      const pgbouncer = compose.services.pgbouncer!;
      expect(pgbouncer).toMatchObject({ build: 'deploy/pgbouncer', profiles: ['replicas'], volumes: ['./deploy/pgbouncer:/etc/cns/pgbouncer:ro'] });
      expect(read('deploy/pgbouncer/Dockerfile')).toMatch(/^CMD \["sh", "\/etc\/cns\/pgbouncer\/compose-start\.sh"\]$/m);
      expect(read('deploy/pgbouncer/compose-start.sh')).toContain('/etc/cns/pgbouncer/pgbouncer.ini');
    });

    it('a stop fits: haproxy takes a replica out before its drain ends, the drain fits the image\'s stop, which fits docker stop and compose\'s grace period', () => {
      const seconds = (text: string) => Number(/^(\d+)s$/.exec(text)?.[1]);
      const check = /^\s*default-server check inter (\d+)s fall (\d+)/m.exec(haproxyCfg)!;
      const checkTimeout = seconds(/^\s*timeout check (\S+)$/m.exec(haproxyCfg)![1]!);
      expect(haproxyCfg).toMatch(/^\s*http-check send meth GET uri \/readyz\b/m);
      // Out of the rotation after `fall` failed checks `inter` apart, each answered within the check timeout.
      const outWithin = Number(check[1]) * Number(check[2]) + checkTimeout;
      const drainSeconds = loadConfig({}).shutdownDrainMs / 1000;
      expect(outWithin).toBeLessThan(drainSeconds);
      const stopMs = Number(imageEnv('SHUTDOWN_TIMEOUT_MS'));
      expect(drainSeconds * 1000).toBeLessThan(stopMs);
      // Compose passes SHUTDOWN_TIMEOUT_MS on from .env, with the image's value when it is unset.
      for (const name of ['api', ...replicas]) expect(loadConfig(containerEnv(name)).shutdownTimeoutMs, name).toBe(stopMs);
      // docker stop waits 10 s by default before SIGKILL.
      expect(stopMs).toBeLessThan(10_000);
      expect(read('Dockerfile')).toMatch(/^STOPSIGNAL SIGTERM$/m);
      for (const name of ['api', ...replicas]) expect(seconds(compose.services[name]!.stop_grace_period!) * 1000).toBeGreaterThan(stopMs);
      // The one replica of the default profile has no balancer to wait for.
      expect(compose.services.api!.environment!.SHUTDOWN_DRAIN_SECONDS).toBe(0);
    });

    it('a station\'s WebSocket outlives the balancer\'s tunnel timeout only when it is silent longer than the service ever lets it be', () => {
      const tunnel = Number(/^\s*timeout tunnel (\d+)s$/m.exec(haproxyCfg)![1]);
      // The longest ping interval the configuration accepts: a silent station is pinged after it.
      expect(() => loadConfig({ OCPP_PING_INTERVAL_SECONDS: '31' })).toThrow();
      expect(tunnel).toBeGreaterThanOrEqual(2 * loadConfig({ OCPP_PING_INTERVAL_SECONDS: '30' }).ocpp.pingIntervalSeconds);
    });
  });
});
