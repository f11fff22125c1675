# Node 24 is the maintained LTS line; the code also runs on Node 20.19+ and 22.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
# Also initialises the embedded database's template (dist/pglite-template, ~40 MB): a first start
# on an empty volume copies it instead of running initdb, whose peak (~700 MB) a 512 MB limit kills.
# This step itself needs about 700 MB of memory, once, at build time.
RUN npm run build

FROM node:24-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/app/data \
    SHUTDOWN_TIMEOUT_MS=8000
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
COPY package.json ./
# The embedded database (used when DATABASE_URL is unset) needs a folder the node user (uid 1000)
# may write: a bind-mounted one must be chowned to 1000:1000 on the host.
RUN mkdir -p /app/data && chown node:node /app/data
# The embedded database lives here: a volume, never the container's own layer, so it survives the
# container and is written at the disk's speed. A new named volume takes this folder's owner (node).
VOLUME ["/app/data"]
USER node
# 3000 serves the API and the stations' OCPP-J endpoint (ws://…/ocpp/{asset id}). Security
# profile 2 needs TLS: terminate it in a proxy in front (wss:// → this port, with
# X-Forwarded-Proto: https and TRUST_PROXY=true), or mount a certificate and set OCPP_TLS_PORT,
# OCPP_TLS_CERT_FILE and OCPP_TLS_KEY_FILE for the service's own TLS listener (publish that port too).
EXPOSE 3000
# docker stop sends SIGTERM: /readyz answers 503 for SHUTDOWN_DRAIN_SECONDS (5 s) so a load
# balancer takes the replica out, then the stations are asked to reconnect and requests finish.
# SHUTDOWN_TIMEOUT_MS (8 s) bounds all of it, the drain included, and stays under `docker stop`'s
# default grace period (10 s), so a slow stop ends in our own exit 1 rather than a SIGKILL.
STOPSIGNAL SIGTERM
# Probes are logged at debug.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The CLI in the container: node dist/cli.js … (tsx is a dev dependency, absent here).
CMD ["node", "dist/server.js"]
