// drizzle-kit reads the per-area table files directly (drizzle.config.ts); this barrel gives the
// application one typed schema object.
export * from '../auth/auth-tables.js';
export * from '../payments/payments-tables.js';
export * from '../asset-management/asset-management-tables.js';
export * from '../stations/stations-tables.js';
export * from '../idempotency/idempotency-tables.js';
