import { afterAll, beforeAll } from 'vitest';
import pg from 'pg';
import { runAuditLogContract, runCapacityContract, runPortContracts, runSettlingStoreContract } from '@genservice/testing';
import { createPostgresStores } from '../src/index.js';
import { createTestDatabase, randomName, type TestDatabase, quietPool } from './helpers.js';

// One database for the file, one fresh schema per make(): creating a database per test would be slow.
let db: TestDatabase;
let pool: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = quietPool({ connectionString: db.url, max: 8 });
  // The final DROP DATABASE ... WITH (FORCE) may reach a connection that is still closing.
  pool.on('error', () => {});
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

runPortContracts('postgres', async () => {
  const stores = await createPostgresStores({ pool, schema: randomName('contract') });
  return {
    store: stores.store,
    ledger: stores.ledger,
    apiKeys: stores.apiKeys,
    idempotency: stores.idempotency,
    close: () => stores.close(),
  };
});

// createPostgresStores links its store to its ledger (settleWith).
runSettlingStoreContract('postgres', async () => {
  const stores = await createPostgresStores({ pool, schema: randomName('settling') });
  return { store: stores.store, ledger: stores.ledger, close: () => stores.close() };
});

runAuditLogContract('postgres', async () => {
  const stores = await createPostgresStores({ pool, schema: randomName('audit') });
  return { auditLog: stores.auditLog, close: () => stores.close() };
});

runCapacityContract('postgres', async () => {
  const schema = randomName('capacity');
  const stores = await createPostgresStores({ pool, schema });
  // Another instance's handle on the same schema.
  const other = await createPostgresStores({ pool, schema });
  return { capacity: stores.capacity, other: other.capacity, close: () => stores.close() };
});
