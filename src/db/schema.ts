// drizzle-kit reads the per-area schema files directly (drizzle.config.ts); this barrel gives the
// application one typed schema object.
export * from '../auth/auth-schema.js';
export * from '../payments/payments-schema.js';
export * from '../asset-management/asset-management-schema.js';
export * from '../stations/stations-tables.js';
