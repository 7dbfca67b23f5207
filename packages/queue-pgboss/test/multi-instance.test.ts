// Several host processes (test/fixtures/host.ts) share one Postgres database (the stores and the pg-boss queue), as
// instances behind a load balancer would, with no Redis: the hosts are given no REDIS_URL and load nothing of it. The
// cases are the scale-out suite of @genservice/testing, which the BullMQ queue runs too; each test has a database of
// its own, and kills whatever it started.
import { expect } from 'vitest';
import { runScaleOutSuite, until } from '@genservice/testing';
import { HostProcess, freshStores, jobStates } from './helpers.js';

runScaleOutSuite('PgBossQueue (no Redis)', { where: 'Postgres' }, async () => {
  const stores = await freshStores();
  const hosts: HostProcess[] = [];
  return {
    stores,
    hosts,
    start(instanceId, extra = {}) {
      const host = new HostProcess({ DATABASE_URL: stores.db.url, INSTANCE_ID: instanceId, ...extra });
      hosts.push(host);
      return host;
    },
    async jobs() {
      const s = await jobStates(stores.db.url, 'genservice');
      // A job handed back by a stopped instance waits in pg-boss's `retry` state until the store lease runs out.
      return { waiting: s.created ?? 0, active: s.active ?? 0, handedBack: s.retry ?? 0 };
    },
    // The killed instance stays down until every lease it held has lapsed, as a real restart would (recovery finds
    // them run out and enqueues their generations again): awaited in the store, not slept on.
    async afterKill(killed) {
      await killed.exited;
      const owner = killed.env.INSTANCE_ID;
      await until(
        async () => {
          const { rows } = await stores.pool.query(
            `SELECT count(*)::int AS n FROM "${stores.schema}".generations WHERE lease_owner = $1 AND lease_expires_at > $2`,
            [owner, Date.now()],
          );
          return rows[0].n === 0;
        },
        { what: `the leases of the killed instance ${owner} to lapse`, timeoutMs: 30_000, intervalMs: 50 },
      );
    },
    async checkHosts(live) {
      // No instance ever needed Redis: none holds a connection to its port.
      for (const h of live) {
        const sockets = (await (await fetch(`${h.url}/_test/redis-connections`)).json()) as { connections: number };
        expect(sockets.connections, h.env.INSTANCE_ID).toBe(0);
      }
    },
    async close() {
      for (const h of hosts) h.kill('SIGKILL');
      await Promise.all(hosts.map((h) => h.exited));
      await stores.drop();
    },
  };
});
