// Cancellation across instances on pg-boss: the case of @genservice/testing that the BullMQ queue runs too.
import { runCancelAcrossInstances } from '@genservice/testing';
import { PgBossQueue } from '../src/index.js';
import { freshStores } from './helpers.js';

runCancelAcrossInstances('PgBossQueue', async () => {
  const stores = await freshStores('gs_pgboss_cancel');
  return {
    stores,
    queue: () => new PgBossQueue({ connectionString: stores.db.url, concurrency: 1, poolSize: 2 }),
    close: () => stores.drop(),
  };
});
