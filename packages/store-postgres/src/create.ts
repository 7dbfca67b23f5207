import pg from 'pg';
import type { Pool } from 'pg';
import type { ApiKeyStore, AuditLog, GenerationStore, IdempotencyStore, Ledger } from '@genservice/core/ports';
import { PostgresAuditLog } from './audit-log.js';
import { PostgresApiKeyStore } from './api-keys.js';
import { validateSchemaName, type PgStatementOptions } from './db.js';
import { PostgresGenerationStore } from './generation-store.js';
import { PostgresIdempotencyStore } from './idempotency.js';
import { PostgresWebhookStore } from './webhook-store.js';
import { PostgresUploadStore } from './upload-store.js';
import { PostgresLedger } from './ledger.js';
import { runMigrations } from './migrations.js';
import { PostgresCapacityStore } from './capacity-store.js';

export interface PostgresStoresOptions extends PgStatementOptions {
  /** e.g. `postgres://user:pass@host:5432/db`. Default: `DATABASE_URL`, else libpq's `PG*` variables. */
  connectionString?: string;
  /** Use the host's own pool instead of opening one; `close()` then leaves it open. */
  pool?: Pool;
  /** Schema that holds every table; created if missing. Default `genservice`. */
  schema?: string;
  /** Connections in the pool this package opens (ignored with `pool`). Default 10. */
  poolSize?: number;
  /**
   * How long a query waits for a connection before failing with UnavailableError (ignored with `pool`).
   * Default 5000 ms: pg's own default waits forever, which turns a database outage into hung requests.
   */
  connectionTimeoutMs?: number;
}

export interface PostgresStores {
  store: GenerationStore;
  ledger: Ledger;
  apiKeys: ApiKeyStore;
  idempotency: IdempotencyStore;
  /** Webhook secrets and the delivery outbox: pass as the service's `webhookStore`. */
  webhookStore: PostgresWebhookStore;
  /** Every admin action on users, credits and keys: pass as the service's `auditLog`. */
  auditLog: AuditLog;
  /** The uploads and their expiry, for the clean-up that deletes their files: pass as the service's `uploadStore`. */
  uploadStore: PostgresUploadStore;
  /** Provider lanes' counters, shared by every instance on the database: pass as the service's `capacity`. */
  capacity: PostgresCapacityStore;
  pool: Pool;
  /** Applies pending migrations (already done by `createPostgresStores`; safe to call again). */
  migrate(): Promise<void>;
  /** Ends the pool if this package opened it. */
  close(): Promise<void>;
}

/**
 * Opens (or adopts) a pool, migrates the schema and returns the four stores, ready to hand to
 * `createGenerationService({ providers, ...stores })`.
 *
 * @example
 * const pgStores = await createPostgresStores({ connectionString: process.env.DATABASE_URL });
 * const service = createGenerationService({ providers, store: pgStores.store, ledger: pgStores.ledger,
 *   apiKeys: pgStores.apiKeys, idempotency: pgStores.idempotency });
 */
export async function createPostgresStores(options: PostgresStoresOptions = {}): Promise<PostgresStores> {
  const schema = validateSchemaName(options.schema ?? 'genservice');
  const owned = options.pool === undefined;
  const pool =
    options.pool ??
    new pg.Pool({
      connectionString: options.connectionString ?? process.env.DATABASE_URL,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: options.connectionTimeoutMs ?? 5000,
    });
  if (owned) {
    // An idle connection that dies (server restart, network) is reported on the pool; without a listener
    // Node would crash the process. The next query reconnects or fails as UnavailableError.
    pool.on('error', () => {});
  }

  const migrate = async (): Promise<void> => {
    await runMigrations(pool, schema);
  };
  try {
    await migrate();
  } catch (err) {
    if (owned) await pool.end().catch(() => {});
    throw err;
  }

  let closed = false;
  const given = { schema, ...(options.preparedStatements !== undefined ? { preparedStatements: options.preparedStatements } : {}) };
  const store = new PostgresGenerationStore(pool, given);
  const ledger = new PostgresLedger(pool, given);
  // Same database and schema: a finishing change settles its reserve in its own statement (issue 36).
  store.settleWith(ledger);
  return {
    store,
    ledger,
    apiKeys: new PostgresApiKeyStore(pool, given),
    idempotency: new PostgresIdempotencyStore(pool, given),
    webhookStore: new PostgresWebhookStore(pool, given),
    auditLog: new PostgresAuditLog(pool, given),
    uploadStore: new PostgresUploadStore(pool, given),
    capacity: new PostgresCapacityStore(pool, given),
    pool,
    migrate,
    async close(): Promise<void> {
      if (closed || !owned) return;
      closed = true;
      await pool.end();
    },
  };
}
