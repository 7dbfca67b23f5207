import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createGenerationService, InProcessQueue, MemoryApiKeyStore, MemoryLedger, MemoryWebhookStore, type GenerationService } from '@genservice/core';
import { until } from '@genservice/testing';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

describe('batches', () => {
  it('sends batch.completed once, to the batch webhook, with the final counts and price', async () => {
    const bodies: string[] = [];
    const server: Server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        bodies.push(body);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const webhookStore = new MemoryWebhookStore();
    let n = 0;
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 2, failureFee: 1 }],
          generate: async () => {
            if (++n === 3) throw new Error('one of them breaks');
            return { text: 'hello' };
          },
        },
      ],
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      webhookStore,
      webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10 },
      recovery: { intervalMs: 0 },
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    await service.start();
    const { batchId } = await service.batches.create('alice', { requests: Array.from({ length: 5 }, () => ({ modelId: 'ok' })), webhook: { url } });
    await until(async () => bodies.length, { accept: (l) => l >= 1, what: 'batch.completed' });
    const event = JSON.parse(bodies[0]!);
    expect(event).toMatchObject({ type: 'batch.completed', data: { batchId, status: 'completed', counts: { pending: 0, processing: 0, completed: 4, failed: 1 }, price: 9 } });
    expect(await service.batches.get('alice', batchId)).toEqual({ status: 'completed', counts: { pending: 0, processing: 0, completed: 4, failed: 1 }, price: 9 });
    // One message, delivered at its first attempt: nothing is left for the sender to send again.
    const deliveries = await until(() => webhookStore.deliveriesOf(batchId), { accept: (d) => d.every((x) => x.state === 'delivered'), what: 'the delivery recorded' });
    expect(deliveries.map((d) => [d.type, d.state, d.attempts])).toEqual([['batch.completed', 'delivered', 1]]);
    // The sender stops after what it has in flight: still the one body.
    await service.stop({ timeoutMs: 500 });
    expect(bodies).toHaveLength(1);
  });

  it("treats a batch as its owner's work: another user's generation starts before a 1,000-item batch drains", async () => {
    const started: string[] = [];
    // Alice's first two runs (both slots) wait until bob's create is in; her later ones until the test ends, so her
    // batch is still draining when bob's generation is done.
    let firstRound!: () => void;
    const bobIsIn = new Promise<void>((r) => (firstRound = r));
    let end!: () => void;
    const testEnds = new Promise<void>((r) => (end = r));
    let slotsTaken!: () => void;
    const bothSlots = new Promise<void>((r) => (slotsTaken = r));
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [{ name: 'who', title: 'Who', fieldType: 'text' }], price: 1 }],
          generate: async (input, ctx) => {
            const who = String(input.settings.who);
            started.push(who);
            if (who === 'alice') {
              if (started.length === 2) slotsTaken();
              await Promise.race([started.length <= 2 ? bobIsIn : testEnds, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
            }
            return { text: 'x' };
          },
        },
      ],
      ledger: new MemoryLedger({ balances: { alice: 1000, bob: 10 } }),
      queue: new InProcessQueue({ concurrency: 2 }),
      recovery: { intervalMs: 0 },
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    cleanups.push(async () => end());
    await service.start();
    const { batchId } = await service.batches.create('alice', { requests: Array.from({ length: 1000 }, () => ({ modelId: 'ok', settings: { who: 'alice' } })) });
    await bothSlots;
    const { generationId } = await service.create('bob', { modelId: 'ok', settings: { who: 'bob' } });
    firstRound();
    await until(() => service.get('bob', generationId), { accept: (g) => g.status === 'completed', what: "bob's generation" });
    // Round-robin over owners: bob's one job is taken within about one round of alice's, never behind her 1,000.
    const bobAt = started.indexOf('bob');
    expect(bobAt).toBeGreaterThanOrEqual(0);
    expect(bobAt).toBeLessThanOrEqual(2 * 2 + 2);
    const batch = await service.batches.get('alice', batchId);
    expect(batch.counts.pending).toBeGreaterThan(0);
  });
});

describe('batches: the order of what a finished member tells', () => {
  // A batch of two run to their end, the second run held until the first has finished: the second is the batch's last
  // open member, so its batch is completed before its own line (completed, or failed) is written.
  it.each([
    ['completes', 'generation completed'],
    ['fails', 'generation failed'],
  ])('a last member that %s finishes its batch before it is told (%s)', async (outcome, told) => {
    const lines: string[] = [];
    const logger = { debug() {}, info: (_o: Record<string, unknown>, msg?: string) => void lines.push(msg ?? ''), warn() {}, error() {} };
    let runs = 0;
    let releaseLast!: () => void;
    const last = new Promise<void>((r) => (releaseLast = r));
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
          generate: async () => {
            if (++runs === 2) {
              await last;
              if (outcome === 'fails') throw new Error('the last one breaks');
            }
            return { text: 'x' };
          },
        },
      ],
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      runner: { concurrency: 1 },
      recovery: { intervalMs: 0, onStart: false },
      logger,
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    await service.start();
    const { batchId } = await service.batches.create('alice', { requests: [{ modelId: 'ok' }, { modelId: 'ok' }] });
    await until(async () => lines.filter((l) => l === 'generation completed').length, { accept: (n) => n === 1, what: 'the first member completed' });
    expect(lines).not.toContain('batch completed');
    releaseLast();
    await until(async () => (await service.batches.get('alice', batchId)).status, { accept: (s) => s === 'completed', what: 'the batch completed' });
    await until(async () => lines.filter((l) => l === told).length, { accept: (n) => n === (told === 'generation completed' ? 2 : 1), what: 'the last member told' });
    const order = lines.filter((l) => l === 'batch completed' || l === 'generation completed' || l === 'generation failed');
    expect(order).toEqual(['generation completed', 'batch completed', told]);
  });

  it('a batch cancelled whole is completed before any of its members is told failed (as complete and failAt order it)', async () => {
    const lines: string[] = [];
    const logger = { debug() {}, info: (_o: Record<string, unknown>, msg?: string) => void lines.push(msg ?? ''), warn() {}, error() {} };
    const service = createGenerationService({
      providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }], generate: async () => ({ text: 'x' }) }],
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      runner: { enabled: false },
      recovery: { intervalMs: 0, onStart: false },
      logger,
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    await service.start();
    const { batchId } = await service.batches.create('alice', { requests: [{ modelId: 'ok' }, { modelId: 'ok' }] });
    lines.length = 0;
    const cancelled = await service.batches.cancel('alice', batchId);
    expect(cancelled).toMatchObject({ status: 'completed', cancelled: 2 });
    expect(lines.filter((l) => l === 'batch completed' || l === 'generation failed')).toEqual(['batch completed', 'generation failed', 'generation failed']);
  });
});

describe("a batch's webhook URL", () => {
  it('is refused (400 naming body.webhook.url, as the batch body names its fields) with a NUL or a lone UTF-16 half, as a create\u2019s webhook URL is: nothing reserved or created', async () => {
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const service = createGenerationService({
      providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }], generate: async () => ({ text: 'x' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
      ledger,
      runner: { enabled: false },
      webhooks: { allowHttp: true, allowPrivateUrls: true },
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    const post = async (path: string, body: string) => {
      const r = await service.handle({ method: 'POST', path, headers: { authorization: 'Bearer ka', 'content-type': 'application/json' }, body });
      return { status: r.status, body: JSON.parse(String(r.body)) };
    };
    for (const url of ['http://127.0.0.1:9/a\\u0000b', 'http://127.0.0.1:9/a\\ud800b']) {
      const one = await post('/v1/generations', `{"modelId":"ok","webhook":{"url":"${url}"}}`);
      expect(one.status).toBe(400);
      const batch = await post('/v1/batches', `{"requests":[{"modelId":"ok"}],"webhook":{"url":"${url}"}}`);
      expect({ status: batch.status, fields: batch.body.error?.details?.map((d: { field: string }) => d.field) }).toEqual({ status: 400, fields: ['body.webhook.url'] });
    }
    expect(await ledger.account('alice')).toEqual({ balance: 100, reserved: 0, settled: 0 });
  });
});
