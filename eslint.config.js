// Lint: typescript-eslint's recommended type-aware rules, plus the import directions the
// architecture depends on (docs/architecture.md), checked on resolved paths by import-x's
// no-restricted-paths: see "Import zones" below.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';

// ── Import zones ───────────────────────────────────────────────────────────────────────────
// The floor plan as data: the parts of src/ and what each may import. The zones are derived
// from these lists only, so moving files changes the lists, never the rules.

// Paths, relative to the repository. `entry` starts the service and the CLI and may import
// anything; the shared parts import no area.
const PARTS = {
  entry: ['src/main', 'src/server.ts', 'src/cli.ts'],
  kernel: ['src/kernel'],
  db: ['src/db'],
  // The HTTP plumbing (plugins, error machinery, idempotency keys) and who calls (authentication):
  // one part, since each needs the other (the OpenAPI document names the access rules; auth's
  // OAuth family registers with the error machinery).
  http: ['src/http', 'src/auth'],
};

// The shared parts each shared part may import besides itself (and packages).
const SHARED_MAY_IMPORT = {
  kernel: [],
  db: ['kernel'],
  http: ['kernel', 'db'],
};

// The areas: each may import the shared parts, and only the areas it names in `reaches`, through
// that area's public entries. Asset management owns the station credential and says what it needs
// of the stations as a port (asset-management/station-link.ts): of the areas it reaches only the
// events; the stations implement the port and use asset management through
// station-credentials-service.ts only. The events area reaches none: the others append their
// events through events-service.ts, in their own transactions.
const AREAS = {
  events: { folder: 'src/events', entries: ['events-service.ts'], reaches: [] },
  payments: { folder: 'src/payments', entries: ['payments-service.ts'], reaches: ['events'] },
  'asset-management': { folder: 'src/asset-management', entries: ['station-credentials-service.ts'], reaches: ['events'] },
  stations: { folder: 'src/stations', entries: ['stations-service.ts'], reaches: ['asset-management', 'events'] },
};

// The Fastify plugins: those of the HTTP plumbing, and each area's.
const PLUGINS = ['src/http/*.ts', 'src/http/errors/**', 'src/**/*-plugin.ts'];

// Within a part, the request path's layers by file name: routes → services → repositories → tables.
const LAYERS = [
  { files: 'src/**/*-repository.ts', mayNotImport: ['src/**/*-service.ts', 'src/**/*-routes.ts', ...PLUGINS], message: 'a repository is the bottom layer: it imports only the db and table modules' },
  { files: 'src/**/*-service.ts', mayNotImport: ['src/**/*-routes.ts', ...PLUGINS], message: 'a service does not know about HTTP routes or plugins' },
  { files: 'src/**/*-tables.ts', mayNotImport: ['src/**/*-service.ts', 'src/**/*-routes.ts', 'src/**/*-repository.ts'], message: 'table definitions are the bottom of the data layer' },
];

// Within the HTTP plumbing, the error machinery names no family: each registers its renderer and
// shapes with it (serveErrorFamily), from its own folder, the OAuth family from auth/ included.
const PLUMBING_ZONES = [
  {
    target: ['src/kernel/errors.ts', 'src/http/error-handler.ts', 'src/http/errors'],
    from: ['src/auth', 'src/http/idempotency'],
    message: 'the error machinery imports no family: a family registers with it (serveErrorFamily)',
  },
];

function importZones() {
  const areaFolders = Object.values(AREAS).map((area) => area.folder);
  const shared = Object.entries(SHARED_MAY_IMPORT).map(([part, allowed]) => ({
    target: PARTS[part],
    from: [...Object.keys(PARTS).filter((other) => other !== part && !allowed.includes(other)).flatMap((other) => PARTS[other]), ...areaFolders],
    message: `${part} imports ${allowed.length ? `only itself, ${allowed.join(' and ')}` : 'only itself'}: no area, nothing built on it.`,
  }));
  const areas = Object.entries(AREAS).flatMap(([name, area]) => [
    { target: area.folder, from: PARTS.entry, message: `${name} is started by the entry files; it does not import them.` },
    ...Object.entries(AREAS)
      .filter(([other]) => other !== name)
      .map(([other, reached]) =>
        area.reaches.includes(other)
          ? { target: area.folder, from: reached.folder, except: reached.entries, message: `${name} reaches ${other} through its public entries only: ${reached.entries.join(', ')}.` }
          : { target: area.folder, from: reached.folder, message: `${name} does not depend on ${other}${name === 'asset-management' ? ': add what it needs of the stations to its StationLink port (station-link.ts)' : ''}.` },
      ),
  ]);
  const layers = LAYERS.map(({ files, mayNotImport, message }) => ({ target: files, from: mayNotImport, message }));
  return [...shared, ...areas, ...layers, ...PLUMBING_ZONES];
}

const importZonesConfig = {
  files: ['src/**/*.ts'],
  plugins: { 'import-x': importX },
  settings: {
    // Imports name the compiled .js; the resolver finds the .ts beside it.
    'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.json', '.node'], extensionAlias: { '.js': ['.ts', '.js'] } })],
  },
  rules: {
    'import-x/no-restricted-paths': ['error', { basePath: import.meta.dirname, zones: importZones() }],
    // An import the resolver cannot follow would pass the zones unchecked.
    'import-x/no-unresolved': 'error',
  },
};
// ── end of import zones ────────────────────────────────────────────────────────────────────

export default tseslint.config(
  // test/generated/: openapi-typescript's output, checked against the live document by a test.
  { ignores: ['dist/', 'node_modules/', 'coverage/', 'bench/results/', 'data/', 'test/generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
    },
  },
  { files: ['**/*.mjs', '**/*.js'], ...tseslint.configs.disableTypeChecked },
  // Plain Node scripts (the bench's naive baseline server): Node's globals.
  { files: ['**/*.mjs'], languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } } },
  importZonesConfig,
  // The OCPP versions and their subprotocols are spelled in one place.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/kernel/ocpp-vocabulary.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'Literal[value=/^(ocpp)?(1\\.6|2\\.0\\.1)$/]',
          message: 'an OCPP version or subprotocol: use the names of src/kernel/ocpp-vocabulary.ts',
        },
      ],
    },
  },
);
