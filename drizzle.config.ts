import { defineConfig } from 'drizzle-kit';

// Each area owns its tables; the files import nothing but drizzle-orm so drizzle-kit can load them.
export default defineConfig({
  dialect: 'postgresql',
  schema: ['./src/auth/auth-schema.ts', './src/payments/payments-schema.ts', './src/asset-management/asset-management-schema.ts', './src/stations/stations-tables.ts'],
  out: './migrations',
});
