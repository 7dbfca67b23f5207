/**
 * @module @genservice/store-postgres
 *
 * PostgreSQL implementations of genservice's GenerationStore, Ledger, ApiKeyStore and IdempotencyStore, safe to
 * share between any number of processes.
 *
 * @example
 * import { createGenerationService } from '@genservice/core';
 * import { createPostgresStores } from '@genservice/store-postgres';
 *
 * const { store, ledger, apiKeys, idempotency } = await createPostgresStores({
 *   connectionString: process.env.DATABASE_URL,
 * });
 * const service = createGenerationService({ providers, store, ledger, apiKeys, idempotency });
 */
export { createPostgresStores } from './create.js';
export type { PostgresStores, PostgresStoresOptions } from './create.js';
export { PostgresGenerationStore } from './generation-store.js';
export { PostgresLedger } from './ledger.js';
export { PostgresApiKeyStore } from './api-keys.js';
export { PostgresAuditLog } from './audit-log.js';
export { PostgresCapacityStore } from './capacity-store.js';
export { PostgresIdempotencyStore } from './idempotency.js';
export { PostgresWebhookStore } from './webhook-store.js';
export { PostgresUploadStore } from './upload-store.js';
export { PostgresNotifier, type PostgresNotifierOptions } from './notifier.js';
export { runMigrations, MIGRATIONS, MIGRATION_LOCK_KEY } from './migrations.js';
export type { Migration } from './migrations.js';
export { isConnectionError } from './errors.js';
export type { PgStatementOptions } from './db.js';
