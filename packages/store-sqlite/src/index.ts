/**
 * @module @genservice/store-sqlite
 *
 * Durable GenerationStore (with its event log), Ledger, ApiKeyStore and IdempotencyStore on one SQLite file (better-sqlite3),
 * for a single host or several processes on one machine sharing the file.
 *
 * @example
 * ```ts
 * import { createGenerationService } from '@genservice/core';
 * import { createSqliteStores } from '@genservice/store-sqlite';
 *
 * const stores = createSqliteStores({ filename: './data/genservice.db' });
 * const service = createGenerationService({ ...stores, providers: [myProvider] });
 * // on shutdown, after the service has stopped:
 * await stores.close();
 * ```
 */
import { openSqliteDatabase, type SqliteDatabase, type SqliteOptions } from './database.js';
import { SqliteGenerationStore } from './generation-store.js';
import { SqliteLedger } from './ledger.js';
import { SqliteApiKeyStore } from './api-keys.js';
import { SqliteAuditLog } from './audit-log.js';
import { SqliteIdempotencyStore } from './idempotency.js';
import { SqliteWebhookStore } from './webhook-store.js';
import { SqliteUploadStore } from './upload-store.js';
import { SqliteCapacityStore } from './capacity-store.js';

export { SqliteGenerationStore } from './generation-store.js';
export { SqliteLedger } from './ledger.js';
export { SqliteApiKeyStore } from './api-keys.js';
export { SqliteAuditLog } from './audit-log.js';
export { SqliteIdempotencyStore } from './idempotency.js';
export { SqliteWebhookStore } from './webhook-store.js';
export { SqliteUploadStore } from './upload-store.js';
export { SqliteCapacityStore } from './capacity-store.js';
export {
  MIGRATIONS,
  appliedMigrations,
  openSqliteDatabase,
  runMigrations,
  type Migration,
  type SqliteDatabase,
  type SqliteOptions,
} from './database.js';

export interface SqliteStores {
  store: SqliteGenerationStore;
  ledger: SqliteLedger;
  apiKeys: SqliteApiKeyStore;
  idempotency: SqliteIdempotencyStore;
  /** Webhook secrets and the delivery outbox (the service option of the same name). */
  webhookStore: SqliteWebhookStore;
  /** Every admin action on users, credits and keys (the service option of the same name). */
  auditLog: SqliteAuditLog;
  /** The uploads and their expiry, for the clean-up that deletes their files (the service option of the same name). */
  uploadStore: SqliteUploadStore;
  /** Provider lanes' counters (the service option `capacity`), shared by every process using the file. */
  capacity: SqliteCapacityStore;
  /** The shared connection, for operators' queries and backups (`db.backup(path)`). */
  db: SqliteDatabase;
  /** Closes the connection. Call it after the service has stopped; calling it again does nothing. */
  close(): Promise<void>;
}

/**
 * Opens (creating and migrating when needed) the database file and returns the four stores on one connection.
 * Spread it into `createGenerationService({ ...stores })`: the extra `db` and `close` keys are for the host.
 */
export function createSqliteStores(options: SqliteOptions): SqliteStores {
  const db = openSqliteDatabase(options);
  return {
    store: new SqliteGenerationStore(db),
    ledger: new SqliteLedger(db),
    apiKeys: new SqliteApiKeyStore(db),
    idempotency: new SqliteIdempotencyStore(db),
    webhookStore: new SqliteWebhookStore(db),
    auditLog: new SqliteAuditLog(db),
    uploadStore: new SqliteUploadStore(db),
    capacity: new SqliteCapacityStore(db),
    db,
    async close(): Promise<void> {
      if (!db.open) return;
      // Keeps the query planner's statistics fresh for the next start; cheap when nothing changed.
      try {
        db.pragma('optimize');
      } finally {
        db.close();
      }
    },
  };
}
