import express from 'express';
import type { Server } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryLedger,
  MemoryWebhookStore,
  type GenerationService,
  type HttpRequest,
} from '@genservice/core';
import { until } from '@genservice/testing';

interface Received {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  type: string;
  data: { generationId: string; status: string; [k: string]: unknown };
}

/**
 * A real receiver: an Express app reading the raw body and verifying each delivery with the standardwebhooks
 * package. `answer(n, id)` decides the status of the n-th attempt of message `id` (1-based).
 */
async function receiver(secretOf: () => Promise<string>, answer: (attempt: number, id: string) => number | { status: number; headers: Record<string, string> } = () => 204) {
  const received: Received[] = [];
  const verified: Received[] = [];
  const attempts = new Map<string, number>();
  const failures: string[] = [];
  const app = express();
  app.post('/hook', express.raw({ type: 'application/json' }), async (req, res) => {
    const body = (req.body as Buffer).toString('utf8');
    const headers = { 'webhook-id': String(req.header('webhook-id')), 'webhook-timestamp': String(req.header('webhook-timestamp')), 'webhook-signature': String(req.header('webhook-signature')) };
    const parsed = JSON.parse(body) as { type: string; data: Received['data'] };
    const entry: Received = { id: headers['webhook-id'], timestamp: headers['webhook-timestamp'], signature: headers['webhook-signature'], body, type: parsed.type, data: parsed.data };
    received.push(entry);
    try {
      new Webhook(await secretOf()).verify(body, headers);
      verified.push(entry);
    } catch (err) {
      failures.push(String(err));
    }
    const n = (attempts.get(entry.id) ?? 0) + 1;
    attempts.set(entry.id, n);
    const a = answer(n, entry.id);
    if (typeof a === 'number') res.sendStatus(a);
    else res.status(a.status).set(a.headers).end();
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  return { url, received, verified, failures, attempts, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

function make(extra: Record<string, unknown> = {}): GenerationService {
  const service = createGenerationService({
    providers: [
      {
        models: [
          { modelId: 'ok', title: 'OK', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 },
          { modelId: 'fails', title: 'Fails', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 3, failureFee: 1 },
        ],
        generate: async (input) => {
          if (input.model.modelId === 'fails') throw new Error('internal: upstream exploded');
          return { text: 'hello' };
        },
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 10_000, bob: 100 } }),
    recovery: { intervalMs: 0 },
    limits: { inFlightPerUser: 10_000 },
    runner: { concurrency: 16 },
    webhooks: { allowHttp: true, allowPrivateUrls: true, retrySchedule: [50, 100, 150], pollIntervalMs: 20 },
    ...extra,
  });
  cleanups.push(() => service.stop({ timeoutMs: 500 }));
  return service;
}

const call = async (service: GenerationService, req: Partial<HttpRequest> & { key?: string; json?: unknown }) => {
  const { key = 'ka', json, ...rest } = req;
  const r = await service.handle({
    method: json === undefined ? 'GET' : 'POST',
    path: '/v1/balance',
    headers: { authorization: `Bearer ${key}`, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
    ...rest,
  });
  return { status: r.status, headers: r.headers, body: JSON.parse(String(r.body || 'null')) };
};

describe('webhooks', () => {
  it('delivers the terminal event of each of 500 generations to a real receiver, every signature valid', { timeout: 60_000 }, async () => {
    const service = make();
    await service.start();
    const secret = (await call(service, { path: '/v1/webhooks/secret' })).body.key as string;
    expect(secret).toMatch(/^whsec_/);
    const hook = await receiver(async () => secret);
    cleanups.push(hook.close);
    const ids: string[] = [];
    for (let i = 0; i < 500; i++) {
      const r = await call(service, { path: '/v1/generations', json: { modelId: 'ok', webhook: { url: hook.url, events: ['generation.completed'] } } });
      expect(r.status).toBe(201);
      ids.push(r.body.generationId);
    }
    await until(() => hook.verified.length >= 500, '500 verified deliveries');
    expect(hook.failures).toEqual([]);
    expect(new Set(hook.verified.map((v) => v.data.generationId))).toEqual(new Set(ids));
    expect(hook.verified.every((v) => v.type === 'generation.completed' && v.data.status === 'completed' && v.data.result === 'hello')).toBe(true);
    // Exactly once each here (at least once in general): no message id twice.
    expect(new Set(hook.received.map((r) => r.id)).size).toBe(hook.received.length);
  });

  it('sends generation.deleted, signed, to a webhook that lists it, and never to one that took the default events', async () => {
    const webhookStore = new MemoryWebhookStore();
    const service = make({ webhookStore });
    await service.start();
    const secret = (await call(service, { path: '/v1/webhooks/secret' })).body.key as string;
    const hook = await receiver(async () => secret);
    cleanups.push(hook.close);
    const asked = (await call(service, { path: '/v1/generations', json: { modelId: 'ok', webhook: { url: hook.url, events: ['generation.completed', 'generation.deleted'] } } })).body.generationId as string;
    const plain = (await call(service, { path: '/v1/generations', json: { modelId: 'ok', webhook: { url: hook.url } } })).body.generationId as string;
    await until(() => hook.verified.filter((v) => v.type === 'generation.completed').length === 2, 'both completions');
    for (const id of [asked, plain]) expect((await call(service, { method: 'DELETE', path: `/v1/generations/${id}` })).status).toBe(204);
    // The DELETE itself writes the message (the log it would be read from is gone): what the outbox holds now is all
    // there will ever be.
    expect((await webhookStore.deliveriesOf(asked)).map((d) => d.type)).toEqual(['generation.deleted']);
    expect(await webhookStore.deliveriesOf(plain)).toEqual([]);
    await until(() => hook.verified.some((v) => v.type === 'generation.deleted'), 'the deleted message');
    expect(hook.verified.filter((v) => v.type === 'generation.deleted').map((v) => v.data)).toEqual([{ generationId: asked, modelId: 'ok', status: 'deleted' }]);
    expect(hook.failures).toEqual([]);
    // The owner reads the deleted generation's deliveries no more than the rest of it.
    expect((await call(service, { path: `/v1/generations/${asked}/webhook-deliveries` })).status).toBe(404);
  });

  it('retries a receiver that answers 500 twice, with the same webhook-id, and shows every attempt to the owner', async () => {
    const service = make();
    await service.start();
    const secret = (await call(service, { path: '/v1/webhooks/secret' })).body.key as string;
    const hook = await receiver(async () => secret, (n) => (n <= 2 ? 500 : 200));
    cleanups.push(hook.close);
    const r = await call(service, { path: '/v1/generations', json: { modelId: 'fails', webhook: { url: hook.url } } });
    const id = r.body.generationId as string;
    await until(() => hook.verified.filter((v) => v.type === 'generation.failed').length >= 3, 'the third attempt of generation.failed');
    const failed = hook.verified.filter((v) => v.type === 'generation.failed');
    expect(new Set(failed.map((f) => f.id)).size).toBe(1);
    expect(failed[0]!.data).toMatchObject({ generationId: id, status: 'failed', price: 1, error: { code: 'provider_error' } });
    expect(JSON.stringify(failed[0]!.data)).not.toContain('upstream exploded');
    // processing was subscribed too (default: all events) and delivered.
    expect(hook.verified.some((v) => v.type === 'generation.processing')).toBe(true);
    await until(async () => {
      const d = await call(service, { path: `/v1/generations/${id}/webhook-deliveries` });
      return d.body.data.some((x: { type: string; state: string }) => x.type === 'generation.failed' && x.state === 'delivered');
    }, 'the delivery to be recorded as delivered');
    const deliveries = (await call(service, { path: `/v1/generations/${id}/webhook-deliveries` })).body.data as Array<{ id: string; type: string; state: string; attempts: Array<{ status?: number }> }>;
    const f = deliveries.find((d) => d.type === 'generation.failed')!;
    expect(f.attempts.map((a) => a.status)).toEqual([500, 500, 200]);
    expect(f.id).toBe(failed[0]!.id);
    // Another user sees nothing of it.
    const theirs = await call(service, { key: 'kb', path: `/v1/generations/${id}/webhook-deliveries` });
    expect(theirs.status).toBe(404);
  });

  it('stops an endpoint that answers 410, honours Retry-After on 429, and gives up after the schedule', async () => {
    const service = make({ webhooks: { allowHttp: true, allowPrivateUrls: true, retrySchedule: [30, 30], pollIntervalMs: 20 } });
    await service.start();
    const secret = (await call(service, { path: '/v1/webhooks/secret' })).body.key as string;
    const gone = await receiver(async () => secret, () => 410);
    const busy = await receiver(async () => secret, (n) => (n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : 204));
    const down = await receiver(async () => secret, () => 503);
    cleanups.push(gone.close, busy.close, down.close);
    const create = async (url: string) =>
      (await call(service, { path: '/v1/generations', json: { modelId: 'ok', webhook: { url, events: ['generation.completed'] } } })).body.generationId as string;
    const g = await create(gone.url);
    const b = await create(busy.url);
    const d = await create(down.url);
    await until(async () => {
      const states = await Promise.all([g, b, d].map(async (id) => (await call(service, { path: `/v1/generations/${id}/webhook-deliveries` })).body.data[0]?.state));
      return states[0] === 'gone' && states[1] === 'delivered' && states[2] === 'failed';
    }, 'gone, delivered and failed');
    expect(gone.received).toHaveLength(1);
    // The 429 asked for a second: the retry came no sooner.
    expect(busy.received).toHaveLength(2);
    expect(Number(busy.received[1]!.timestamp) - Number(busy.received[0]!.timestamp)).toBeGreaterThanOrEqual(1);
    // One attempt and two retries, then given up.
    expect(down.received).toHaveLength(3);
  });

  it('gives each user their own secret; a rotation signs with both for the overlap', async () => {
    const service = make();
    await service.start();
    const a1 = (await call(service, { path: '/v1/webhooks/secret' })).body.key as string;
    expect((await call(service, { path: '/v1/webhooks/secret' })).body.key).toBe(a1);
    const b1 = (await call(service, { key: 'kb', path: '/v1/webhooks/secret' })).body.key as string;
    expect(b1).not.toBe(a1);
    const rotated = await call(service, { path: '/v1/webhooks/secret/rotate', method: 'POST' });
    expect(rotated.status).toBe(200);
    const a2 = rotated.body.key as string;
    expect(a2).not.toBe(a1);
    expect((await call(service, { path: '/v1/webhooks/secret' })).body.key).toBe(a2);
    // A receiver still on the old secret verifies, and so does one on the new; bob's secret verifies nothing of alice's.
    const oldSide = await receiver(async () => a1);
    cleanups.push(oldSide.close);
    await call(service, { path: '/v1/generations', json: { modelId: 'ok', webhook: { url: oldSide.url, events: ['generation.completed'] } } });
    await until(() => oldSide.received.length >= 1, 'a delivery');
    expect(oldSide.failures).toEqual([]);
    const sig = oldSide.received[0]!;
    const headers = { 'webhook-id': sig.id, 'webhook-timestamp': sig.timestamp, 'webhook-signature': sig.signature };
    expect(sig.signature.split(' ')).toHaveLength(2);
    expect(() => new Webhook(a2).verify(sig.body, headers)).not.toThrow();
    expect(() => new Webhook(b1).verify(sig.body, headers)).toThrow();
    expect((await call(service, { path: '/v1/webhooks/secret' })).status).toBe(200);
    expect((await call(service, { key: 'nope', path: '/v1/webhooks/secret' })).status).toBe(401);
  });

  it('refuses webhook URLs that are not public https, naming the field, and charges nothing', async () => {
    const strict = make({ webhooks: {} });
    await strict.start();
    const bad = [
      'http://example.com/hook',
      'https://127.0.0.1/hook',
      'https://[::1]/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://10.0.0.5/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://localhost/hook',
      'https://user:pass@example.com/hook',
      'ftp://example.com/hook',
      'javascript:alert(1)',
      'not a url',
      `https://example.com/${'a'.repeat(3000)}`,
    ];
    for (const url of bad) {
      const r = await call(strict, { path: '/v1/generations', json: { modelId: 'ok', webhook: { url } } });
      expect(r.status, url).toBe(400);
      expect(r.body.error.code, url).toBe('invalid_request');
      expect(r.body.error.details[0].field, url).toMatch(/^webhook(\.url)?$/);
    }
    for (const webhook of [{ url: 'https://example.com', events: [] }, { url: 'https://example.com', events: ['generation.created'] }, { url: 5 }, 'https://example.com', { url: 'https://example.com', extra: 1 }]) {
      const r = await call(strict, { path: '/v1/generations', json: { modelId: 'ok', webhook } });
      expect(r.status, JSON.stringify(webhook)).toBe(400);
      expect(r.body.error.code).toBe('invalid_request');
    }
    expect((await call(strict, { path: '/v1/balance' })).body.balance).toBe(10_000);
    // A quote checks the webhook as a create would.
    expect((await call(strict, { path: '/v1/quotes', json: { modelId: 'ok', webhook: { url: 'https://127.0.0.1/x' } } })).status).toBe(400);
  });

  it('sends the host default endpoints every event a user subscribed to', async () => {
    let secret = '';
    const hook = await receiver(async () => secret);
    cleanups.push(hook.close);
    const service = make({
      webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 20, endpoints: (userId: string) => (userId === 'bob' ? [{ url: hook.url, events: ['generation.completed'] }] : []) },
    });
    await service.start();
    secret = (await call(service, { key: 'kb', path: '/v1/webhooks/secret' })).body.key;
    // Alice's (no endpoint) finishes first, so its events come before bob's in the log the outbox reads in order.
    const alice = (await call(service, { path: '/v1/generations', json: { modelId: 'ok' } })).body.generationId;
    await until(async () => (await call(service, { path: `/v1/generations/${alice}` })).body.status === 'completed', 'alice\u2019s generation');
    const bob = (await call(service, { key: 'kb', path: '/v1/generations', json: { modelId: 'ok' } })).body.generationId;
    await until(() => hook.verified.length >= 1, 'bob\u2019s delivery');
    // The outbox wrote bob's delivery, so it had read alice's events before it: it wrote none for them.
    expect((await call(service, { path: `/v1/generations/${alice}/webhook-deliveries` })).body.data).toEqual([]);
    expect(hook.verified.map((v) => v.data.generationId)).toEqual([bob]);
  });
});
