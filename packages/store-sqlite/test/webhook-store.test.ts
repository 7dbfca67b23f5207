import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { runWebhookStoreContract } from '@genservice/testing';
import { createSqliteStores } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'gs-wh-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

runWebhookStoreContract('SqliteWebhookStore', async () => {
  const stores = createSqliteStores({ filename: join(dir, `wh-${n++}.db`) });
  return { webhooks: stores.webhookStore, close: () => stores.close() };
});
