// client.batches against core's service on the Express adapter, over a real socket.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import { MemoryApiKeyStore, MemoryLedger, createGenerationService, type GenerationService } from '@genservice/core';
import { genserviceRouter } from '@genservice/express';
import { InsufficientFundsError, InvalidRequestError, NotFoundError, createClient } from '../src/index.js';
import { until } from '@genservice/testing';

let service: GenerationService;
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  service = createGenerationService({
    providers: [
      {
        models: [
          {
            modelId: 'echo',
            title: 'Echo',
            resultType: 'text',
            estimatedGenerationTime: 0.01,
            settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
            price: 3,
          },
        ],
        generate: async (input) => ({ text: `echo: ${String(input.settings.prompt)}` }),
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'carol-key', userId: 'carol' }, { apiKey: 'dave-key', userId: 'dave' }] }),
    ledger: new MemoryLedger({ balances: { carol: 20, dave: 20 } }),
  });
  await service.start();
  const app = express();
  app.use('/api', genserviceRouter(service));
  server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  await service.stop();
});

describe('client.batches', () => {
  it('creates, follows, lists and cancels a batch; refusals are typed errors', async () => {
    const client = createClient({ baseUrl, apiKey: 'carol-key' });
    const created = await client.batches.create({ requests: [{ modelId: 'echo', settings: { prompt: 'a' } }, { modelId: 'echo', settings: { prompt: 'b' } }] }, { idempotencyKey: 'b1' });
    expect(created.generationIds).toHaveLength(2);
    expect(await client.batches.create({ requests: [{ modelId: 'echo', settings: { prompt: 'a' } }, { modelId: 'echo', settings: { prompt: 'b' } }] }, { idempotencyKey: 'b1' })).toEqual(created);
    const batch = await until(() => client.batches.get(created.batchId), { accept: (b) => b.status === 'completed', timeoutMs: 5000, intervalMs: 10 });
    expect(batch).toEqual({ status: 'completed', counts: { pending: 0, processing: 0, completed: 2, failed: 0 }, price: 6 });
    const items = [];
    for await (const item of client.batches.listAll(created.batchId, { limit: 1 })) items.push(item.result);
    expect(items.sort()).toEqual(['echo: a', 'echo: b']);
    expect(await client.batches.cancel(created.batchId)).toEqual({ ...batch, cancelled: 0 });

    const bad = await client.batches.create({ requests: [{ modelId: 'echo', settings: { prompt: 'x' } }, { modelId: 'echo' }] }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(InvalidRequestError);
    expect((bad as InvalidRequestError).details?.[0]?.field).toMatch(/^requests\[1\]/);
    await expect(client.batches.create({ requests: Array.from({ length: 5 }, () => ({ modelId: 'echo', settings: { prompt: 'x' } })) })).rejects.toBeInstanceOf(InsufficientFundsError);
    expect((await client.balance()).balance).toBe(14);
    await expect(createClient({ baseUrl, apiKey: 'dave-key' }).batches.get(created.batchId)).rejects.toBeInstanceOf(NotFoundError);
  });
});
