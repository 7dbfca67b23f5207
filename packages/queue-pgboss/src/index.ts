/**
 * @module @genservice/queue-pgboss
 *
 * A genservice JobQueue on pg-boss 10 (PostgreSQL), for running one service as several host instances behind a load
 * balancer with no Redis: any instance accepts a create, any instance's worker runs it. Use it with a store every
 * instance shares (`@genservice/store-postgres`, on the same database or another); the store's leases and the
 * ledger's idempotent settle make each generation complete and bill once although pg-boss delivers a job at least
 * once. Live streams on one instance see another's transitions through `PostgresNotifier` (LISTEN/NOTIFY) of
 * `@genservice/store-postgres`.
 *
 * Each instance holds a pool of `poolSize` connections (default 4), or uses the host's pool. pg-boss keeps its
 * tables in their own schema (`genservice_jobs` by default), created and migrated on first use.
 *
 * @example
 * import { createGenerationService } from '@genservice/core';
 * import { createPostgresStores, PostgresNotifier } from '@genservice/store-postgres';
 * import { PgBossQueue } from '@genservice/queue-pgboss';
 *
 * const url = process.env.DATABASE_URL!;
 * const pg = await createPostgresStores({ connectionString: url });
 * const service = createGenerationService({
 *   providers: [myProvider],
 *   store: pg.store,
 *   ledger: pg.ledger,
 *   apiKeys: pg.apiKeys,
 *   idempotency: pg.idempotency,
 *   // Concurrency and the hand-back delay (the store lease) come from `runner` when the service starts the queue.
 *   queue: new PgBossQueue({ connectionString: url }),
 *   // Live streams on one instance see transitions made on another at once.
 *   push: { notifier: new PostgresNotifier({ connectionString: url, pool: pg.pool }) },
 *   runner: { concurrency: 8, leaseMs: 30_000 },
 * });
 * await service.start();
 * process.on('SIGTERM', async () => {
 *   await service.stop({ timeoutMs: 20_000 }); // running jobs finish; waiting ones stay in Postgres
 *   await pg.close();
 *   process.exit(0);
 * });
 */
export { PgBossQueue } from './pgboss-queue.js';
export type { PgBossQueueOptions } from './pgboss-queue.js';
