import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient, InsufficientFundsError, InvalidSettingsError, GenerationFailedError } from '@genservice/client';
import { startHost, tempData, type RunningHost, type TempData } from './helpers.js';
import { until } from '@genservice/testing';

// issue 6: the typed client against a real example host (demo models, SQLite), started as `pnpm start` would.
describe('@genservice/client against examples/fastify-host', () => {
  let host: RunningHost;
  let data: TempData;
  beforeAll(async () => {
    data = tempData([
      { id: 'carol', apiKey: 'carol-key-0123456789abcdef', balance: 100 },
      { id: 'poor', apiKey: 'poor-key-0123456789abcdefg', balance: 0 },
    ]);
    host = await startHost('fastify', { USERS_FILE: data.usersFile, DATA_DIR: data.dir, DEMO_SPEED: '0.05' });
  }, 60_000);
  afterAll(async () => {
    if (host) await host.stop();
    data?.cleanup();
  });

  it('lists models, runs a text and an image generation to completion, and reads the balance', async () => {
    const client = createClient({ baseUrl: host.api, apiKey: 'carol-key-0123456789abcdef' });
    const models = await client.models.list();
    expect(models.map((m) => m.modelId)).toContain('demo-text');
    const statuses: string[] = [];
    const text = await client.generations.run(
      { modelId: 'demo-text', settings: { prompt: 'a lighthouse' } },
      { timeoutMs: 30_000, onStatus: (status) => statuses.push(status) },
    );
    expect(text.status).toBe('completed');
    expect(typeof text.result).toBe('string');
    expect(statuses.at(-1)).toBe('completed');
    const image = await client.generations.run({ modelId: 'demo-image', settings: { prompt: 'a lighthouse', size: '256x256' } }, { timeoutMs: 30_000 });
    const file = await fetch(image.result);
    expect(file.headers.get('content-type')).toBe('image/png');
    expect((await client.balance()).balance).toBe(100 - text.price - image.price);
  });

  it('runs the flaky demo model on its stable fallback when its upstream is out, at the price reserved, and batches', async () => {
    const client = createClient({ baseUrl: host.api, apiKey: 'carol-key-0123456789abcdef' });
    const before = (await client.balance()).balance;
    const { batchId, generationIds } = await client.batches.create({ requests: Array.from({ length: 12 }, (_, i) => ({ modelId: 'demo-text-flaky', settings: { prompt: `flaky ${i}` } })) });
    const batch = await until(() => client.batches.get(batchId), { accept: (b) => b.status === 'completed', timeoutMs: 30_000, intervalMs: 50 });
    expect(batch.counts).toEqual({ pending: 0, processing: 0, completed: 12, failed: 0 });
    const served = await Promise.all(generationIds.map((id) => client.generations.details(id)));
    // About half hit the outage (by id: all 12 missing it has a chance of 1 in 4,096); every one completed, the
    // fallback's price never above the reserve.
    expect(served.some((d) => d.servedModelId === 'demo-text')).toBe(true);
    for (const d of served) expect(d.price).toBeLessThanOrEqual(1);
    expect(served.map((d) => d.servedModelId ?? d.modelId).every((m) => m === 'demo-text' || m === 'demo-text-flaky')).toBe(true);
    expect((await client.balance()).balance).toBe(before - batch.price);
  }, 60_000);

  it('turns the host\'s errors into typed errors', async () => {
    const client = createClient({ baseUrl: host.api, apiKey: 'carol-key-0123456789abcdef' });
    await expect(client.generations.create({ modelId: 'demo-image', settings: { size: '1x1' } })).rejects.toBeInstanceOf(InvalidSettingsError);
    const poor = createClient({ baseUrl: host.api, apiKey: 'poor-key-0123456789abcdefg' });
    await expect(poor.generations.create({ modelId: 'demo-text', settings: { prompt: 'x' } })).rejects.toBeInstanceOf(InsufficientFundsError);
    await expect(client.generations.run({ modelId: 'demo-always-fails', settings: { prompt: 'x' } }, { timeoutMs: 30_000 })).rejects.toBeInstanceOf(GenerationFailedError);
  });
});
