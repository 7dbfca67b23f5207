/**
 * @module @genservice/queue-bullmq
 *
 * A genservice JobQueue on BullMQ 5 (Redis), for running one service as several host instances behind a load
 * balancer: any instance accepts a create, any instance's worker runs it. Use it with a store every instance shares
 * (`@genservice/store-postgres`); the store's leases and the ledger's idempotent settle make each generation
 * complete and bill once although BullMQ delivers a job at least once.
 *
 * Each instance holds three Redis connections (one to enqueue, two for its worker) and one when it runs no worker.
 * Redis must run with `maxmemory-policy noeviction`; see docs/operations.md for persistence and sizing.
 *
 * @example
 * import { createGenerationService } from '@genservice/core';
 * import { createPostgresStores } from '@genservice/store-postgres';
 * import { BullMQQueue, RedisNotifier } from '@genservice/queue-bullmq';
 *
 * const pg = await createPostgresStores({ connectionString: process.env.DATABASE_URL });
 * const service = createGenerationService({
 *   providers: [myProvider],
 *   store: pg.store,
 *   ledger: pg.ledger,
 *   apiKeys: pg.apiKeys,
 *   idempotency: pg.idempotency,
 *   // Concurrency and the lock (the store lease) come from `runner` when the service starts the queue.
 *   queue: new BullMQQueue({ connection: process.env.REDIS_URL! }),
 *   // Live streams on one instance see transitions made on another at once.
 *   push: { notifier: new RedisNotifier({ connection: process.env.REDIS_URL! }) },
 *   runner: { concurrency: 8, leaseMs: 30_000 },
 * });
 * await service.start();
 * process.on('SIGTERM', async () => {
 *   await service.stop({ timeoutMs: 20_000 }); // running jobs finish; waiting ones stay in Redis
 *   await pg.close();
 *   process.exit(0);
 * });
 */
export { BullMQQueue } from './bullmq-queue.js';
export type { BullMQQueueOptions } from './bullmq-queue.js';
export { RedisNotifier } from './redis-notifier.js';
export type { RedisNotifierOptions } from './redis-notifier.js';
export { RedisCapacityStore } from './redis-capacity.js';
export type { RedisCapacityStoreOptions } from './redis-capacity.js';
