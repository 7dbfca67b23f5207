import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createGenerationService, MemoryGenerationStore, MemoryLedger, MemoryWebhookStore, systemClock, type Clock, type GenerationService } from '@genservice/core';
import type { NewDelivery } from '@genservice/core/ports';
import { FakeClock, until } from '@genservice/testing';
import { stopOn } from './support/fake-time.js';

// A batch's completion (its completedAt and its batch.completed delivery) after a process died half-way through it:
// the outbox write comes first, then the compare-and-set, and recovery completes any open batch whose generations
// all finished. The crash is a throw at the point the process would have died.

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/**
 * The system clock (real timers, so the webhook sender delivers on its own), with a time the test moves ahead when
 * recovery must see a batch as older than its cut-off.
 */
function aheadClock(): { clock: Clock; advance: (ms: number) => void } {
  let ahead = 0;
  return { clock: { ...systemClock, now: () => systemClock.now() + ahead }, advance: (ms) => void (ahead += ms) };
}

/**
 * While `dead`, every `completeBatch` throws: the process died after the batch's last generation finished, before
 * the batch was completed (every instance that finished one of its generations died there). `crashes` counts them.
 */
class DiesAtCompleteBatch extends MemoryGenerationStore {
  dead = true;
  crashes = 0;
  override async completeBatch(id: string, now: number): Promise<boolean> {
    if (this.dead) {
      this.crashes++;
      throw new Error('process died before completeBatch');
    }
    return super.completeBatch(id, now);
  }
}

/** While `dead`, adding a batch.completed delivery throws: the process died before the outbox write. */
class DiesAtBatchDelivery extends MemoryWebhookStore {
  dead = true;
  crashes = 0;
  override async addDeliveries(deliveries: NewDelivery[]): Promise<void> {
    if (this.dead && deliveries.some((d) => d.type === 'batch.completed')) {
      this.crashes++;
      throw new Error('process died before the batch.completed delivery was written');
    }
    return super.addDeliveries(deliveries);
  }
}

async function receiver(): Promise<{ url: string; bodies: string[] }> {
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
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}

async function serviceWith(store: MemoryGenerationStore, webhookStore: MemoryWebhookStore, openBatchMs = 0): Promise<{ service: GenerationService; advance: (ms: number) => void }> {
  const { clock, advance } = aheadClock();
  const service = createGenerationService({
    clock,
    providers: [
      {
        models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 2 }],
        generate: async () => ({ text: 'hello' }),
      },
    ],
    store,
    ledger: new MemoryLedger({ balances: { alice: 100 } }),
    webhookStore,
    webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10 },
    // Recovery runs only when the test calls it, and looks at every open batch, however young.
    recovery: { onStart: false, intervalMs: 0, openBatchMs },
  });
  cleanups.push(() => service.stop({ timeoutMs: 500 }));
  await service.start();
  return { service, advance };
}

/** Creates a batch and waits until all its generations finished (the completion itself is what the crash lost). */
async function finishedBatch({ service, advance }: { service: GenerationService; advance: (ms: number) => void }, store: MemoryGenerationStore, url: string): Promise<string> {
  const { batchId } = await service.batches.create('alice', { requests: Array.from({ length: 3 }, () => ({ modelId: 'ok' })), webhook: { url } });
  await until(() => store.batchCounts(batchId), { accept: (c) => c.counts.completed === 3, what: 'the batch generations' });
  // The batch must be strictly older than recovery's cut-off (createdAt < now - openBatchMs): the clock moves 1 ms.
  advance(1);
  return batchId;
}

async function expectCompletedOnce(service: GenerationService, webhookStore: MemoryWebhookStore, bodies: string[], batchId: string): Promise<void> {
  expect(await service.batches.get('alice', batchId)).toEqual({ status: 'completed', counts: { pending: 0, processing: 0, completed: 3, failed: 0 }, price: 6 });
  const delivered = await until(() => webhookStore.deliveriesOf(batchId), { accept: (ds) => ds.length > 0 && ds.every((d) => d.state === 'delivered'), what: 'the delivery' });
  expect(delivered.map((d) => d.type)).toEqual(['batch.completed']);
  expect(bodies).toHaveLength(1);
  expect(JSON.parse(bodies[0]!)).toMatchObject({ type: 'batch.completed', data: { batchId, status: 'completed', counts: { completed: 3 }, price: 6 } });
}

describe('a batch completion lost to a crash', () => {
  it('dies after the delivery was written but before completeBatch: recovery completes it, and the delivery stays one', async () => {
    const { url, bodies } = await receiver();
    const store = new DiesAtCompleteBatch();
    const webhookStore = new MemoryWebhookStore();
    const made = await serviceWith(store, webhookStore);
    const service = made.service;
    const batchId = await finishedBatch(made, store, url);
    expect(store.crashes).toBeGreaterThan(0);
    expect((await store.getBatch(batchId, 'alice'))?.completedAt).toBeUndefined();
    // The outbox write came first: the delivery is there (the outbox may send it already); a retry writes the same one.
    expect((await webhookStore.deliveriesOf(batchId)).map((d) => d.type)).toEqual(['batch.completed']);

    store.dead = false;
    const report = await service.recover();
    expect(report.batchesCompleted).toBe(1);
    expect((await store.getBatch(batchId, 'alice'))?.completedAt).toBeTypeOf('number');
    await expectCompletedOnce(service, webhookStore, bodies, batchId);
    // A second pass finds nothing open.
    expect((await service.recover()).batchesCompleted).toBe(0);
    expect((await webhookStore.deliveriesOf(batchId)).map((d) => d.type)).toEqual(['batch.completed']);
  });

  it('dies before the delivery was written: the batch stays open until recovery writes it and completes it', async () => {
    const { url, bodies } = await receiver();
    const store = new MemoryGenerationStore();
    const webhookStore = new DiesAtBatchDelivery();
    const made = await serviceWith(store, webhookStore);
    const service = made.service;
    const batchId = await finishedBatch(made, store, url);
    expect(webhookStore.crashes).toBeGreaterThan(0);
    // Never completed without its delivery: it reads open, and nothing is in the outbox for it.
    expect((await store.getBatch(batchId, 'alice'))?.completedAt).toBeUndefined();
    expect(await webhookStore.deliveriesOf(batchId)).toEqual([]);

    webhookStore.dead = false;
    expect((await service.recover()).batchesCompleted).toBe(1);
    expect((await store.getBatch(batchId, 'alice'))?.completedAt).toBeTypeOf('number');
    await expectCompletedOnce(service, webhookStore, bodies, batchId);
  });

  it('two racing recovery passes complete it once, with one delivery', async () => {
    const { url, bodies } = await receiver();
    const store = new MemoryGenerationStore();
    const webhookStore = new DiesAtBatchDelivery();
    const made = await serviceWith(store, webhookStore);
    const service = made.service;
    const batchId = await finishedBatch(made, store, url);
    expect(webhookStore.crashes).toBeGreaterThan(0);
    webhookStore.dead = false;
    // Both passes see an open batch whose generations all finished; both write the same delivery, one completes it.
    const reports = await Promise.all([service.recover(), service.recover()]);
    expect(reports.map((r) => r.batchesCompleted).sort()).toEqual([0, 1]);
    await expectCompletedOnce(service, webhookStore, bodies, batchId);
  });

  it('leaves a batch younger than recovery.openBatchMs to the instance finishing it', async () => {
    const { url } = await receiver();
    const store = new DiesAtCompleteBatch();
    const webhookStore = new MemoryWebhookStore();
    const made = await serviceWith(store, webhookStore, 60_000);
    const service = made.service;
    const batchId = await finishedBatch(made, store, url);
    store.dead = false;
    expect((await service.recover()).batchesCompleted).toBe(0);
    expect((await store.getBatch(batchId, 'alice'))?.completedAt).toBeUndefined();
  });

  it('leaves a batch whose generations are still running open', async () => {
    const store = new MemoryGenerationStore();
    const webhookStore = new MemoryWebhookStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { clock, advance } = aheadClock();
    const service = createGenerationService({
      clock,
      providers: [
        {
          models: [{ modelId: 'slow', title: 'Slow', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
          generate: async () => {
            await gate;
            return { text: 'x' };
          },
        },
      ],
      store,
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      webhookStore,
      recovery: { onStart: false, intervalMs: 0, openBatchMs: 0 },
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    cleanups.push(async () => release());
    await service.start();
    const { batchId } = await service.batches.create('alice', { requests: [{ modelId: 'slow' }, { modelId: 'slow' }] });
    // Older than the cut-off (openBatchMs 0), so only its running generations keep it open.
    advance(1);
    expect((await service.recover()).batchesCompleted).toBe(0);
    expect((await store.getBatch(batchId, 'alice'))?.completedAt).toBeUndefined();
    release();
    await until(() => store.getBatch(batchId, 'alice'), { accept: (b) => b?.completedAt !== undefined, what: 'the batch completion' });
  });
});

describe('recovery: reserves a crash left open', () => {
  /** A service on `ledger` with the runner off and 501 generations waiting (one more than recovery's page), each with its live reserve. */
  async function withBacklog(ledger: MemoryLedger, clock: FakeClock): Promise<GenerationService> {
    const service = createGenerationService({
      providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }], generate: async () => ({ text: 'x' }) }],
      ledger,
      clock,
      limits: { inFlightPerUser: 1000 },
      runner: { enabled: false },
      recovery: { onStart: false, intervalMs: 0, orphanReserveMs: 60_000 },
    });
    await service.start();
    for (let i = 0; i < 501; i++) await service.create('alice', { modelId: 'ok' });
    return service;
  }

  it('releases a forgotten reserve behind more live ones than one page holds (the walk goes past the oldest 500)', async () => {
    const clock = new FakeClock();
    const ledger = new MemoryLedger({ balances: { alice: 10_000 } });
    const service = await withBacklog(ledger, clock);
    try {
      await clock.advance(1);
      // A create that died after its reserve and before its insert: the reserve has no generation.
      expect(await ledger.reserve('alice', 'forgotten-create', 1, clock.now())).toBe('ok');
      await clock.advance(60_001);
      const report = await service.recover();
      expect(report.released).toBe(1);
      expect((await ledger.openReserves(1000)).map((r) => r.generationId)).not.toContain('forgotten-create');
      expect(await ledger.account('alice')).toEqual({ balance: 10_000 - 501, reserved: 501, settled: 0 });
    } finally {
      await stopOn(clock, service);
    }
  });

  it('ends its walk over a host ledger that does not page (it answers its first page again): that page is looked at once', async () => {
    const clock = new FakeClock();
    const ledger = new MemoryLedger({ balances: { alice: 10_000 } });
    const firstPage = ledger.openReserves.bind(ledger);
    let reads = 0;
    ledger.openReserves = (limit: number) => {
      reads++;
      return firstPage(limit);
    };
    const service = await withBacklog(ledger, clock);
    try {
      expect(await service.recover()).toMatchObject({ settled: 0, released: 0 });
      expect(reads).toBe(2);
    } finally {
      await stopOn(clock, service);
    }
  });
});
