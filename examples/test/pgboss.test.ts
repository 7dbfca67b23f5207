import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// A database of the test's own, and one-off statements on it, as the packages' own tests make them.
import { createTestDatabase, sql, type TestDatabase } from '../../packages/queue-pgboss/test/helpers.js';
import { startHost, tempData, type RunningHost, type TempData } from './helpers.js';
import { until } from '@genservice/testing';

const KEY = 'alice-key-0123456789abcdef';
const auth = { authorization: `Bearer ${KEY}` };

// QUEUE=pgboss: two example hosts on one Postgres database and nothing else (no REDIS_URL reaches them). One accepts a
// generation, either runs it (pg-boss), the other streams it live (PostgresNotifier).
describe('example hosts with QUEUE=pgboss (Postgres alone)', () => {
  let db: TestDatabase;
  let data: TempData;
  const hosts: RunningHost[] = [];
  let redisUrl: string | undefined;

  beforeAll(async () => {
    // The hosts inherit this process's environment: none of them may be told where a Redis is.
    redisUrl = process.env.REDIS_URL;
    delete process.env.REDIS_URL;
    db = await createTestDatabase('gs_examples_pgboss');
    data = tempData([{ id: 'alice', apiKey: KEY, balance: 1000 }]);
    const env = { QUEUE: 'pgboss', DATABASE_URL: db.url, USERS_FILE: data.usersFile, DATA_DIR: data.dir, DEMO_SPEED: '0.05', LOG_LEVEL: 'info', RATE_LIMIT_PER_MINUTE: '600' };
    // One after the other: the first installs the schemas and credits the user.
    hosts.push(await startHost('express', env));
    hosts.push(await startHost('fastify', env));
  }, 90_000);

  afterAll(async () => {
    for (const h of hosts) expect(await h.stop()).toBe(0);
    if (redisUrl !== undefined) process.env.REDIS_URL = redisUrl;
    await db?.drop();
    data?.cleanup();
  });

  it('says it runs on pg-boss, and is ready by its readyz (the queue answers through Postgres)', async () => {
    for (const h of hosts) {
      const configured = h
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; queue?: string; store?: string })
        .find((l) => l.msg === 'genservice configured');
      expect(configured).toMatchObject({ queue: 'pgboss', store: 'postgres' });
      expect((await fetch(`${h.api}/readyz`)).status).toBe(200);
    }
  });

  it('runs a generation to completion, streamed live on the other instance, charged once', async () => {
    const [a, b] = hosts as [RunningHost, RunningHost];
    const models = (await (await fetch(`${a.api}/v1/models`, { headers: auth })).json()) as {
      models: Array<{ modelId: string; resultType: string; settings: Array<{ name: string; required?: boolean; options?: string[]; fieldType?: string }> }>;
    };
    const text = models.models.find((m) => m.resultType === 'text' && !m.settings.some((s) => ['image', 'video', 'audio', 'file'].includes(s.fieldType ?? '')))!;
    const settings: Record<string, unknown> = {};
    for (const s of text.settings) {
      if (s.options) settings[s.name] = s.options[0];
      else if (s.required) settings[s.name] = 'a haiku about queues';
    }
    const created = await fetch(`${a.api}/v1/generations`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ modelId: text.modelId, settings }) });
    expect(created.status).toBe(201);
    const { generationId } = (await created.json()) as { generationId: string };
    const stream = await fetch(`${b.api}/v1/generations/${generationId}/events`, { headers: auth });
    expect(stream.status).toBe(200);
    expect(await stream.text()).toMatch(/event: completed/); // the stream ends after the terminal event
    const done = await until(async () => (await (await fetch(`${b.api}/v1/generations/${generationId}`, { headers: auth })).json()) as { status: string; price?: number }, { accept: (g) => g.status === 'completed' || g.status === 'failed' });
    expect(done.status).toBe('completed');
    const balance = (await (await fetch(`${a.api}/v1/balance`, { headers: auth })).json()) as { balance: number };
    expect(balance.balance).toBe(1000 - done.price!);
    // The job went through pg-boss, in its own schema of the same database.
    // (completed in pg-boss just after the handler returns, in the next batch of completions)
    const rows = await until(() => sql(db.url, `SELECT state::text AS state, data->>'generationId' AS id FROM genservice_jobs.job WHERE name = 'genservice'`), { accept: (r) => r.length === 1 && r[0]!.state === 'completed', timeoutMs: 10_000 });
    expect(rows).toEqual([{ state: 'completed', id: generationId }]);
  });
});
