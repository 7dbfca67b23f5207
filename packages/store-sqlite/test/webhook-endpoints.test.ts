// Webhook endpoints on SQLite end to end (issue 41), from the SQLite outbox: the shared scenario of @genservice/testing.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { describeWebhookEndpointsEndToEnd } from '@genservice/testing';
import { createSqliteStores } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'gs-we-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describeWebhookEndpointsEndToEnd('sqlite', async () => {
  const stores = createSqliteStores({ filename: join(dir, 'we.db') });
  return { stores, close: async () => stores.close() };
});
