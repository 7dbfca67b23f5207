import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { runUploadStoreContract } from '@genservice/testing';
import { createPostgresStores, PostgresUploadStore } from '../src/index.js';
import { createTestDatabase, type TestDatabase } from './helpers.js';

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('genservice_uploads');
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
  pool.on('error', () => undefined);
  await createPostgresStores({ pool, schema: 'up' });
}, 60_000);
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

runUploadStoreContract('PostgresUploadStore', async () => ({ uploads: new PostgresUploadStore(pool, { schema: 'up' }), close: async () => undefined }));
