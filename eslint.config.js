// Lint: typescript-eslint's recommended type-aware rules, plus the import direction the
// architecture depends on (README "Architecture"): routes → services → repositories → db, pure
// rules import nothing that does I/O, areas talk through services, never through each other's
// repositories or routes, and the shared error machinery imports no area.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const layer = (files, group, message) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns: [{ group, message }] }] },
});

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
  layer(['src/**/*-repository.ts'], ['**/*-service.js', '**/*-routes.js', '**/plugins/**'], 'a repository is the bottom layer: it imports only the db and table modules'),
  layer(['src/**/*-service.ts'], ['**/*-routes.js', '**/plugins/**'], 'a service does not know about HTTP routes or plugins'),
  layer(['src/**/*-tables.ts'], ['**/*-service.js', '**/*-routes.js', '**/*-repository.js'], 'table definitions are the bottom of the data layer'),
  layer(['src/db/**'], ['**/*-service.js', '**/*-routes.js', '**/*-repository.js', '**/plugins/**'], 'the db module is the bottom layer'),
  // The HTTP error machinery is shared plumbing: each API family registers its renderer and its
  // shapes from its own folder, so the machinery names none of them.
  layer(
    ['src/errors.ts', 'src/plugins/error-handler.ts', 'src/plugins/errors/**'],
    ['**/payments/**', '**/asset-management/**', '**/stations/**', '**/auth/**', '**/idempotency/**'],
    'the error machinery imports no area: a family registers with it (serveErrorFamily)',
  ),
  layer(['src/payments/**'], ['**/asset-management/**', '**/stations/**'], 'payments do not depend on other areas'),
  layer(['src/asset-management/**'], ['**/payments/**', '**/stations/*-repository.js', '**/stations/*-routes.js'], 'asset management talks to other areas through their services only'),
  layer(['src/stations/**'], ['**/payments/**', '**/asset-management/*-repository.js', '**/asset-management/*-routes.js'], 'stations talk to other areas through their services only'),
);
