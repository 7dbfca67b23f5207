// Cancellation across instances on BullMQ: the case of @genservice/testing that the pg-boss queue runs too.
import { runCancelAcrossInstances } from '@genservice/testing';
import { BullMQQueue } from '../src/index.js';
import { REDIS_URL, freshStores, obliterate, randomName } from './helpers.js';

runCancelAcrossInstances('BullMQQueue', async () => {
  const stores = await freshStores();
  const prefix = randomName('gs-cancel');
  return {
    stores,
    queue: () => new BullMQQueue({ connection: REDIS_URL, prefix, concurrency: 1, lockDurationMs: 1000 }),
    async close() {
      await obliterate(prefix);
      await stores.drop();
    },
  };
});
