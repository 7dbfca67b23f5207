// Several host processes (test/fixtures/host.ts) share one Postgres schema and one BullMQ queue, as instances behind a
// load balancer would. The cases are the scale-out suite of @genservice/testing, which the pg-boss queue runs too;
// each test has its own schema and key prefix, and kills whatever it started.
import { runScaleOutSuite } from '@genservice/testing';
import { HostProcess, REDIS_URL, freshStores, jobCounts, obliterate, randomName } from './helpers.js';

runScaleOutSuite('BullMQQueue', { where: 'Redis' }, async () => {
  const stores = await freshStores();
  const prefix = randomName('gsq');
  const hosts: HostProcess[] = [];
  return {
    stores,
    hosts,
    start(instanceId, extra = {}) {
      const host = new HostProcess({ DATABASE_URL: stores.databaseUrl, SCHEMA: stores.schema, REDIS_URL, PREFIX: prefix, INSTANCE_ID: instanceId, ...extra });
      hosts.push(host);
      return host;
    },
    async jobs() {
      const counts = await jobCounts(prefix);
      // Fair scheduling gives every job a priority: BullMQ keeps waiting ones among the prioritized. A job handed back
      // by a stopped instance is delayed until the store lease of its run has run out.
      return { waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0), active: counts.active ?? 0, handedBack: counts.delayed ?? 0 };
    },
    async close() {
      for (const h of hosts) h.kill('SIGKILL');
      await Promise.all(hosts.map((h) => h.exited));
      await obliterate(prefix);
      await stores.drop();
    },
  };
});
