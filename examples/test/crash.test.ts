import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStores } from '@genservice/store-sqlite';
import { until } from '@genservice/testing';
import { startHost, tempData, type RunningHost } from './helpers.js';

const users = [
  { id: 'alice', apiKey: 'alice-key-0123456789abcdef', balance: 1000 },
  { id: 'bob', apiKey: 'bob-key-0123456789abcdefgh', balance: 500 },
];

interface Gen {
  status: string;
  result?: string;
  price?: number;
}

// issue 4: SIGKILL a host while generations are pending and processing; restart it on the same data.
describe('crash recovery (SQLite, express-host)', () => {
  const data = tempData(users);
  let host: RunningHost | undefined;
  afterAll(async () => {
    if (host) await host.stop();
    data.cleanup();
  });

  it('finishes every generation after a SIGKILL, keeps results, and bills exactly once', async () => {
    const env = { USERS_FILE: data.usersFile, DATA_DIR: data.dir, LEASE_MS: '1000', RECOVERY_INTERVAL_MS: '300', CONCURRENCY: '2' };
    host = await startHost('express', { ...env, DEMO_SPEED: '1' });
    const models = ((await (await fetch(`${host.api}/v1/models`, { headers: { authorization: `Bearer ${users[0]!.apiKey}` } })).json()) as {
      models: Array<{ modelId: string; resultType: string; settings: Array<{ name: string; fieldType: string; required?: boolean; options?: string[] }> }>;
    }).models.filter((m) => !m.settings.some((s) => ['image', 'video', 'audio', 'file'].includes(s.fieldType)));
    const created: Array<{ id: string; key: string }> = [];
    for (let i = 0; i < 16; i++) {
      const user = users[i % 2]!;
      const model = models[i % models.length]!;
      const settings: Record<string, unknown> = {};
      for (const s of model.settings) {
        if (s.options) settings[s.name] = s.options[i % s.options.length];
        else if (s.required) settings[s.name] = `prompt number ${i}`;
      }
      const res = await fetch(`${host.api}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${user.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: model.modelId, settings }),
      });
      if (res.status === 201) created.push({ id: ((await res.json()) as { generationId: string }).generationId, key: user.apiKey });
      else expect(res.status).toBe(402);
    }
    expect(created.length).toBeGreaterThan(8);
    const read = async (g: { id: string; key: string }, api: string): Promise<Gen> =>
      (await (await fetch(`${api}/v1/generations/${g.id}`, { headers: { authorization: `Bearer ${g.key}` } })).json()) as Gen;
    // Some are processing, the rest pending, when the process dies.
    await until(async () => Promise.all(created.map((g) => read(g, host!.api))), { accept: (all) => all.some((g) => g.status === 'processing'), timeoutMs: 30_000, intervalMs: 50 });
    const before = await Promise.all(created.map((g) => read(g, host!.api)));
    expect(before.some((g) => g.status === 'pending')).toBe(true);
    await host.kill();

    host = await startHost('express', { ...env, DEMO_SPEED: '0.05' });
    const after = await until(
      async () => Promise.all(created.map((g) => read(g, host!.api))),
      { accept: (all) => all.every((g) => g.status === 'completed' || g.status === 'failed'), timeoutMs: 60_000, intervalMs: 100 },
    );
    for (const g of after) {
      expect(g.price).toBeTypeOf('number');
      if (g.status === 'completed' && g.result!.startsWith('http')) {
        const file = await fetch(g.result!);
        expect(file.status).toBe(200);
        expect((await file.arrayBuffer()).byteLength).toBeGreaterThan(0);
      }
    }
    expect(await host.stop()).toBe(0);
    host = undefined;

    const stores = createSqliteStores({ filename: join(data.dir, 'genservice.db') });
    try {
      let charged = 0;
      for (const u of users) {
        const a = await stores.ledger.account(u.id);
        expect(a.reserved).toBe(0);
        expect(a.balance + a.reserved + a.settled).toBe(u.balance);
        charged += a.settled;
      }
      expect(charged).toBe(after.reduce((sum, g) => sum + (g.price ?? 0), 0));
    } finally {
      await stores.close();
    }
  }, 120_000);
});
