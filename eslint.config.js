// Lint: typescript-eslint's recommended type-aware rules, plus the import direction the
// architecture depends on (docs/architecture.md, "Import rules"): routes → services → repositories → db, pure
// rules import nothing that does I/O, and areas talk through services, never through each
// other's repositories or routes.
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
  layer(['src/payments/**'], ['**/asset-management/**', '**/stations/**'], 'payments do not depend on other areas'),
  layer(['src/asset-management/**'], ['**/payments/**'], 'asset management does not depend on payments'),
  layer(['src/stations/**'], ['**/payments/**'], 'stations do not depend on payments'),
  // Between asset management and the stations, one way only (a rule of its own, so that the layer
  // rules above, which share one rule name and replace each other per file, cannot drop it): asset
  // management owns the station credential and says what it needs of the stations as a port
  // (asset-management/station-link.ts); the stations implement it and use asset management through
  // its one public module, never its repositories, tables or rules.
  {
    files: ['src/asset-management/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/stations/**'], message: 'asset management does not depend on the stations: add what it needs to its StationLink port (station-link.ts)' }] },
      ],
    },
  },
  {
    files: ['src/stations/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/asset-management/**', '!**/asset-management/station-credentials-service.js', '**/db/schema.js'],
              message: 'the stations use asset management through asset-management/station-credentials-service.ts only, and never its tables',
            },
          ],
        },
      ],
    },
  },
  // The OCPP versions and their subprotocols are spelled in one place.
  {
    files: ['src/**/*.ts'],
    ignores: ['src/ocpp-vocabulary.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'Literal[value=/^(ocpp)?(1\\.6|2\\.0\\.1)$/]',
          message: 'an OCPP version or subprotocol: use the names of src/ocpp-vocabulary.ts',
        },
      ],
    },
  },
);
