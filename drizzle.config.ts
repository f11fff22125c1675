import { defineConfig } from 'drizzle-kit';

// Each area owns its tables in a `*-tables.ts` file; drizzle-kit loads every one of them.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/**/*-tables.ts',
  out: './migrations',
});
