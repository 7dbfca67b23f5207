// Webhook delivery through the service against real receivers on loopback (issue 24, items 9 and 10): a receiver's
// Retry-After never shortens the retry schedule (a fake Date walks the schedule), and one slow receiver holds only
// its own share of the delivery slots (event order, not wall time).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryLedger,
  MemoryWebhookStore,
  type GenerationService,
} from '@genservice/core';
import type { ClaimFairness, Delivery } from '@genservice/core/ports';
import { until } from '@genservice/testing';
import { retryDelay } from '../src/push/webhooks.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** A receiver on loopback whose answer the test decides per request; `held` are requests not answered yet. */
async function receiver(answer: (req: IncomingMessage, res: ServerResponse) => void) {
  const received: string[] = [];
  const server: Server = createServer((req, res) => {
    received.push(req.url ?? '');
    req.resume();
    answer(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  return { base, received };
}

/** Counts claims and the `now` each was made at, so a test can wait for the delivery loop to have looked. */
class WatchedWebhookStore extends MemoryWebhookStore {
  claims: number[] = [];
  override async claimDue(now: number, limit: number, workerId: string, leaseMs: number, fairness?: ClaimFairness): Promise<Delivery[]> {
    const got = await super.claimDue(now, limit, workerId, leaseMs, fairness);
    this.claims.push(now);
    return got;
  }
}

function make(webhooks: Record<string, unknown>, webhookStore = new MemoryWebhookStore()): GenerationService {
  const service = createGenerationService({
    providers: [
      {
        models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }],
        generate: async () => ({ text: 'hello' }),
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 10_000, bob: 10_000 } }),
    recovery: { intervalMs: 0 },
    limits: { inFlightPerUser: 10_000 },
    webhookStore,
    webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10, ...webhooks },
  });
  cleanups.push(() => service.stop({ timeoutMs: 500 }));
  return service;
}

async function create(service: GenerationService, key: string, url: string): Promise<string> {
  const r = await service.handle({
    method: 'POST',
    path: '/v1/generations',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ modelId: 'ok', webhook: { url, events: ['generation.completed'] } }),
  });
  expect(r.status).toBe(201);
  return JSON.parse(String(r.body)).generationId as string;
}

describe("a receiver's Retry-After (issue 24, item 9)", () => {
  it('lengthens a wait, never shortens it', () => {
    for (const random of [0, 0.5, 0.999]) {
      expect(retryDelay(300_000, 2000, random)).toBe(Math.round(300_000 * (0.8 + random * 0.4)));
      expect(retryDelay(5000, 7_200_000, random)).toBe(7_200_000);
      expect(retryDelay(5000, 30 * 24 * 3600_000, random)).toBe(24 * 3600_000);
    }
  });

  it('Retry-After: 2 on every 503 does not use the attempts up faster than the schedule (a fake clock walks it)', async () => {
    const start = Date.UTC(2030, 0, 1);
    vi.useFakeTimers({ toFake: ['Date'], now: start });
    const schedule = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
    const store = new WatchedWebhookStore();
    const hook = await receiver((_req, res) => res.writeHead(503, { 'retry-after': '2' }).end());
    const service = make({ retrySchedule: schedule }, store);
    await service.start();
    const id = await create(service, 'ka', `${hook.base}/hook`);
    const delivery = async () => (await store.deliveriesOf(id))[0];
    for (let attempt = 1; attempt <= schedule.length; attempt++) {
      await until(async () => (await delivery())?.attempts === attempt, `attempt ${attempt} recorded`);
      const d = (await delivery())!;
      const at = d.history[attempt - 1]!.at;
      expect(d.state).toBe('pending');
      // Retry-After asked for 2 s; the schedule's step (less at most 20 % jitter) is what is waited.
      expect(d.nextAttemptAt - at).toBeGreaterThanOrEqual(Math.floor(schedule[attempt - 1]! * 0.8));
      // The clock moves 3 s (past what the receiver asked for): the loop looks, and finds nothing due.
      vi.setSystemTime(at + 3000);
      const looked = store.claims.length;
      await until(() => store.claims.slice(looked).some((now) => now >= at + 3000), 'a claim after the 3 s');
      expect(hook.received).toHaveLength(attempt);
      vi.setSystemTime(d.nextAttemptAt);
    }
    await until(async () => (await delivery())?.state === 'failed', 'the delivery given up after the schedule');
    const d = (await delivery())!;
    expect(d.attempts).toBe(schedule.length + 1);
    // The attempts span the schedule (about 28 h here), not 8 x 2 s.
    const span = d.history.at(-1)!.at - d.history[0]!.at;
    expect(span).toBeGreaterThanOrEqual(Math.floor(schedule.reduce((a, b) => a + b) * 0.8));
  });

  it('a Retry-After longer than the step is honoured', async () => {
    const store = new MemoryWebhookStore();
    const hook = await receiver((_req, res) => res.writeHead(429, { 'retry-after': '7200' }).end());
    const service = make({ retrySchedule: [5_000] }, store);
    await service.start();
    const id = await create(service, 'ka', `${hook.base}/hook`);
    await until(async () => (await store.deliveriesOf(id))[0]?.attempts === 1, 'the first attempt');
    const [d] = await store.deliveriesOf(id);
    expect(d!.nextAttemptAt - d!.history[0]!.at).toBeGreaterThanOrEqual(7_200_000);
  });
});

describe('one slow receiver delays only its owner (issue 24, item 10)', () => {
  it("with a user's receivers hanging, another user's delivery goes out while they still hang", async () => {
    const hangingOpen: ServerResponse[] = [];
    const hanging = await receiver((_req, res) => hangingOpen.push(res));
    const fast = await receiver((_req, res) => res.writeHead(204).end());
    const service = make({ concurrency: 6, concurrencyPerEndpoint: 2, concurrencyPerUser: 4, timeoutMs: 60_000, leaseMs: 120_000 });
    // Answered before the service stops (cleanups run last first), so stopping need not wait for them.
    cleanups.push(async () => {
      for (const res of hangingOpen) res.writeHead(200).end();
    });
    await service.start();
    // Alice: 8 deliveries to one hanging URL and 8 more spread over three other hanging URLs.
    for (let i = 0; i < 8; i++) await create(service, 'ka', `${hanging.base}/one`);
    for (let i = 0; i < 8; i++) await create(service, 'ka', `${hanging.base}/other${i % 3}`);
    // Her share of the six slots: four (the per-user cap), at most two of them to /one (the per-endpoint cap).
    await until(() => hangingOpen.length >= 4, "four of alice's deliveries hanging");
    await create(service, 'kb', `${fast.base}/bob`);
    await until(() => fast.received.length === 1, "bob's delivery");
    // Bob's went out while every one of alice's still hung: none was answered, none timed out.
    expect(hangingOpen.every((res) => !res.headersSent)).toBe(true);
    expect(hangingOpen).toHaveLength(4);
    expect(hanging.received.filter((u) => u === '/one').length).toBeLessThanOrEqual(2);
  });
});

describe('what a delivery logs (the guard keeps query and credentials out of its words)', () => {
  it('names a receiver without its query: a 410 and a delivery given up log no token a URL carries', async () => {
    const lines: string[] = [];
    const log = (obj: Record<string, unknown>, msg?: string): void => void lines.push(`${msg ?? ''} ${JSON.stringify(obj)}`);
    const service = createGenerationService({
      providers: [{ models: [{ modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }], generate: async () => ({ text: 'hello' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
      ledger: new MemoryLedger({ balances: { alice: 100 } }),
      recovery: { intervalMs: 0 },
      webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10, retrySchedule: [1] },
      logger: { debug: log, info: log, warn: log, error: log },
    });
    cleanups.push(() => service.stop({ timeoutMs: 500 }));
    await service.start();
    const gone = await receiver((_req, res) => res.writeHead(410).end());
    const failing = await receiver((_req, res) => res.writeHead(500).end());
    await create(service, 'ka', `${gone.base}/hook?token=gone-s3cret`);
    await create(service, 'ka', `${failing.base}/hook?token=failing-s3cret`);
    await until(() => lines.some((l) => l.includes('410 Gone')) && lines.some((l) => l.includes('given up')), 'the 410 and the give-up logged');
    expect(lines.filter((l) => l.includes('/hook'))).not.toEqual([]);
    expect(lines.filter((l) => l.includes('s3cret'))).toEqual([]);
  });
});
