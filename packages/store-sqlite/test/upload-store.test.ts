import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { runUploadStoreContract } from '@genservice/testing';
import { createSqliteStores } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'gs-up-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

runUploadStoreContract('SqliteUploadStore', async () => {
  const stores = createSqliteStores({ filename: join(dir, `up-${n++}.db`) });
  return { uploads: stores.uploadStore, close: () => stores.close() };
});
