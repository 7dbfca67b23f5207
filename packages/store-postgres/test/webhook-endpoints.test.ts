// Webhook endpoints on PostgreSQL end to end (issue 41), from the Postgres outbox: the shared scenario of @genservice/testing.
import { describeWebhookEndpointsEndToEnd } from '@genservice/testing';
import { createPostgresStores } from '../src/index.js';
import { createTestDatabase } from './helpers.js';

describeWebhookEndpointsEndToEnd('postgres', async () => {
  const db = await createTestDatabase('genservice_we');
  const stores = await createPostgresStores({ connectionString: db.url, poolSize: 3 });
  return {
    stores,
    close: async () => {
      await stores.close();
      await db.drop();
    },
  };
});
