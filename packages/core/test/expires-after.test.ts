// A create's own shorter life, `expiresAfterSeconds` (issue 26): checked against the service's retention, shown as
// `expiresAt` in details, list and webhooks, an expired generation reads exactly like a deleted one, and the sweep
// deletes it (files first). The rule is the Lifecycle's `expiresAt`.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryBlobStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationService,
} from '@genservice/core';
import { until } from '@genservice/testing';
import { expiresAt, hasExpired, MAX_LIFE_SECONDS, maxLifeSeconds } from '../src/domain/rules.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

function make(extra: Record<string, unknown> = {}) {
  const store = new MemoryGenerationStore();
  const blobs = new MemoryBlobStore();
  const service = createGenerationService({
    providers: [
      {
        models: [
          { modelId: 'img', title: 'Image', resultType: 'image', estimatedGenerationTime: 0.01, settings: [], price: 1 },
          { modelId: 'txt', title: 'Text', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 },
        ],
        generate: async (input) => (input.model.modelId === 'img' ? { bytes: new Uint8Array([1, 2, 3]), mimeType: 'image/png' } : { text: 'hi' }),
      },
    ],
    store,
    blobs,
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 1000 } }),
    publicUrl: 'http://files.test',
    recovery: { intervalMs: 0 },
    ...extra,
  });
  cleanups.push(() => service.stop({ timeoutMs: 500 }));
  return { service, store, blobs };
}

const AUTH = { authorization: 'Bearer ka', 'content-type': 'application/json' };

async function post(service: GenerationService, path: string, body: unknown) {
  const res = await service.handle({ method: 'POST', path, headers: AUTH, body: JSON.stringify(body) });
  return { status: res.status, body: JSON.parse(String(res.body)) as Record<string, any> };
}

async function get(service: GenerationService, path: string) {
  return service.handle({ method: 'GET', path, headers: { authorization: 'Bearer ka' } });
}

describe('the expiry rule (lifecycle.ts)', () => {
  it('is the earlier of the retention and the own life, from when it finished; nothing while it runs', () => {
    expect(expiresAt({}, 60_000)).toBeUndefined();
    expect(expiresAt({ expiresAfterSeconds: 5 }, 60_000)).toBeUndefined();
    expect(expiresAt({ finishedAt: 1000 }, undefined)).toBeUndefined();
    expect(expiresAt({ finishedAt: 1000 }, 60_000)).toBe(61_000);
    expect(expiresAt({ finishedAt: 1000, expiresAfterSeconds: 5 }, 60_000)).toBe(6000);
    expect(expiresAt({ finishedAt: 1000, expiresAfterSeconds: 5 }, undefined)).toBe(6000);
    // A retention shortened after the create still wins.
    expect(expiresAt({ finishedAt: 1000, expiresAfterSeconds: 3600 }, 2000)).toBe(3000);
    expect(hasExpired({ finishedAt: 1000, expiresAfterSeconds: 5 }, undefined, 5999)).toBe(false);
    expect(hasExpired({ finishedAt: 1000, expiresAfterSeconds: 5 }, undefined, 6000)).toBe(true);
    expect(hasExpired({}, 1, Number.MAX_SAFE_INTEGER)).toBe(false);
  });

  it('allows at most the retention in whole seconds, or 2^31-1 without one', () => {
    expect(maxLifeSeconds({ finishedTtlMs: 3_600_000, sweepIntervalMs: 1 })).toBe(3600);
    expect(maxLifeSeconds({ finishedTtlMs: 1500, sweepIntervalMs: 1 })).toBe(1);
    expect(maxLifeSeconds({ sweepIntervalMs: 1 })).toBe(MAX_LIFE_SECONDS);
    expect(MAX_LIFE_SECONDS).toBe(2 ** 31 - 1);
  });
});

describe('expiresAfterSeconds on create', () => {
  it('is refused with a 400 naming the field beyond the retention, or not a positive integer, on create and quote', async () => {
    const { service, store } = make({ retention: { finishedTtlMs: 3_600_000, sweepIntervalMs: 3_600_000 } });
    for (const bad of [3601, 0, -1, 1.5, '60', null, 2 ** 31]) {
      for (const path of ['/v1/generations', '/v1/quotes']) {
        const res = await post(service, path, { modelId: 'txt', expiresAfterSeconds: bad });
        expect(res.status, `${path} ${String(bad)}`).toBe(400);
        expect(res.body.error.code).toBe('invalid_request');
        expect(res.body.error.details.map((d: { field: string }) => d.field)).toEqual(['expiresAfterSeconds']);
      }
    }
    // The retention's own length is allowed; nothing was written by the refused ones.
    expect((await post(service, '/v1/generations', { modelId: 'txt', expiresAfterSeconds: 3600 })).status).toBe(201);
    expect((await post(service, '/v1/quotes', { modelId: 'txt', expiresAfterSeconds: 3600 })).status).toBe(200);
    expect((await store.list('alice', { limit: 100 })).length).toBe(1);
    // The programmatic create asks the same rule.
    await expect(service.create('alice', { modelId: 'txt', expiresAfterSeconds: 3601 })).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it('without retention is its own limit: any positive 32-bit integer is kept, and shown as expiresAt', async () => {
    const { service, store } = make();
    await service.start();
    const res = await post(service, '/v1/generations', { modelId: 'txt', expiresAfterSeconds: MAX_LIFE_SECONDS });
    expect(res.status).toBe(201);
    const id = res.body.generationId as string;
    const rec = (await until(() => store.getById(id), { accept: (r) => r?.status === 'completed' }))!;
    expect(rec).toMatchObject({ expiresAfterSeconds: MAX_LIFE_SECONDS, lifeEndsAt: rec.finishedAt! + MAX_LIFE_SECONDS * 1000 });
    const details = JSON.parse(String((await get(service, `/v1/generations/${id}/details`)).body));
    expect(details.expiresAt).toBe(new Date(rec.finishedAt! + MAX_LIFE_SECONDS * 1000).toISOString());
    // A generation that asked for nothing keeps forever, as before: no expiresAt.
    const plain = (await post(service, '/v1/generations', { modelId: 'txt' })).body.generationId as string;
    await until(() => store.getById(plain), { accept: (r) => r?.status === 'completed' });
    expect(JSON.parse(String((await get(service, `/v1/generations/${plain}/details`)).body)).expiresAt).toBeUndefined();
  });

  it('is part of what an Idempotency-Key remembers: another life with the same key is a mismatch', async () => {
    const { service } = make({ retention: { finishedTtlMs: 3_600_000, sweepIntervalMs: 3_600_000 } });
    const send = (body: unknown) =>
      service.handle({ method: 'POST', path: '/v1/generations', headers: { ...AUTH, 'idempotency-key': 'k1' }, body: JSON.stringify(body) });
    expect((await send({ modelId: 'txt', expiresAfterSeconds: 60 })).status).toBe(201);
    expect((await send({ modelId: 'txt', expiresAfterSeconds: 60 })).status).toBe(201);
    const other = await send({ modelId: 'txt', expiresAfterSeconds: 61 });
    expect(other.status).toBe(422);
    expect(JSON.parse(String(other.body)).error.code).toBe('idempotency_mismatch');
  });

  it('a cancelled generation gets its end of life too (the finishing change writes it)', async () => {
    const { service, store } = make({ runner: { enabled: false } });
    const id = (await post(service, '/v1/generations', { modelId: 'txt', expiresAfterSeconds: 100 })).body.generationId as string;
    expect((await post(service, `/v1/generations/${id}/cancel`, {})).status).toBe(200);
    const rec = (await store.getById(id))!;
    expect(rec).toMatchObject({ status: 'failed', lifeEndsAt: rec.finishedAt! + 100_000 });
  });
});

describe('an expired generation (its own life ended)', () => {
  it('shows expiresAt in details, list and webhooks, then reads exactly like a deleted one, and the sweep deletes its file and row', async () => {
    const bodies: Array<Record<string, any>> = [];
    const server: Server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        bodies.push(JSON.parse(raw));
        res.end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    });
    const hook = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const { service, store, blobs } = make({
      // The service keeps an hour; the sweep never runs by itself here (the test calls it).
      retention: { finishedTtlMs: 3_600_000, sweepIntervalMs: 3_600_000 },
      webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 10 },
    });
    await service.start();
    const id = (await post(service, '/v1/generations', { modelId: 'img', expiresAfterSeconds: 1, webhook: { url: hook, events: ['generation.completed'] } })).body
      .generationId as string;
    const kept = (await post(service, '/v1/generations', { modelId: 'img' })).body.generationId as string;
    const rec = (await until(() => store.getById(id), { accept: (r) => r?.status === 'completed' }))!;
    await until(() => store.getById(kept), { accept: (r) => r?.status === 'completed' });
    const at = new Date(rec.finishedAt! + 1000).toISOString();
    expect(rec.lifeEndsAt).toBe(rec.finishedAt! + 1000);

    // The webhook was built when it completed: it carries the same expiresAt.
    await until(async () => bodies.length, { accept: (n) => n >= 1 });
    expect(bodies[0]).toMatchObject({ type: 'generation.completed', data: { generationId: id, expiresAt: at } });

    const details = await service.details('alice', id).catch(() => null);
    // Read before it expired (on a very slow machine it may be gone already: the rest still holds).
    if (details) {
      expect(details.expiresAt).toBe(at);
      expect(Number(new URL(details.result!).searchParams.get('exp')) * 1000).toBeLessThanOrEqual(rec.finishedAt! + 1000);
    }
    const fileUrl = new URL((await service.details('alice', kept)).result!);
    const ownFile = details ? new URL(details.result!) : null;

    // Past its life: 404 on poll, details and stream, exactly like a missing id; gone from the list; DELETE 404.
    await until(() => service.get('alice', id).then(() => 'there', () => 'gone'), { accept: (s) => s === 'gone' });
    const missing = await get(service, `/v1/generations/${'A'.repeat(22)}`);
    for (const path of [`/v1/generations/${id}`, `/v1/generations/${id}/details`, `/v1/generations/${id}?include=details`, `/v1/generations/${id}/events`]) {
      const res = await get(service, path);
      expect(res.status, path).toBe(404);
      expect(res.body, path).toBe(missing.body);
    }
    expect((await service.list('alice', {})).data.map((g) => g.generationId)).toEqual([kept]);
    expect((await service.handle({ method: 'DELETE', path: `/v1/generations/${id}`, headers: { authorization: 'Bearer ka' } })).status).toBe(404);
    // Its file link stopped working with it (a link never outlives its generation).
    if (ownFile) expect((await get(service, ownFile.pathname + ownFile.search)).status).toBe(403);

    // The sweep deletes it, file first; the one without a life of its own stays, file and all.
    expect(await blobs.get(rec.resultKey!)).not.toBeNull();
    expect(await service.sweep()).toBe(1);
    expect(await store.getById(id)).toBeNull();
    expect(await blobs.get(rec.resultKey!)).toBeNull();
    expect(await store.getById(kept)).not.toBeNull();
    expect((await get(service, fileUrl.pathname + fileUrl.search)).status).toBe(200);
  });

  it('is swept by the timer without any retention, once per interval across instances', async () => {
    const { MemoryIdempotencyStore } = await import('@genservice/core');
    const idempotency = new MemoryIdempotencyStore();
    const store = new MemoryGenerationStore();
    const blobs = new MemoryBlobStore();
    const lists: number[] = [];
    const listLifeEndedBefore = store.listLifeEndedBefore.bind(store);
    store.listLifeEndedBefore = async (before, limit) => {
      lists.push(before);
      return listLifeEndedBefore(before, limit);
    };
    const services = [0, 1].map(() => make({ store, blobs, idempotency, retention: { sweepIntervalMs: 20 } }).service);
    for (const s of services) await s.start();
    const id = (await post(services[0]!, '/v1/generations', { modelId: 'img', expiresAfterSeconds: 1 })).body.generationId as string;
    const rec = (await until(() => store.getById(id), { accept: (r) => r?.status === 'completed' }))!;
    await until(() => store.getById(id), { accept: (r) => r === null });
    expect(await blobs.get(rec.resultKey!)).toBeNull();
    // Only elected sweepers read: never two reads for one interval.
    const windows = lists.map((t) => Math.floor(t / 20));
    expect(new Set(windows).size).toBe(windows.length);
  });
});

describe('reads through the expiry check, whatever the host store answers with', () => {
  function withStore(store: MemoryGenerationStore) {
    const service = createGenerationService({
      providers: [{ models: [{ modelId: 'txt', title: 'Text', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 0 }], generate: async () => ({ text: 'hi' }) }],
      store,
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
      runner: { enabled: false },
    });
    cleanups.push(() => service.stop());
    return service;
  }

  it('a store whose get throws instead of rejecting gives a rejected read and a 500 answer, never a throw out of service.get', async () => {
    const store = new MemoryGenerationStore();
    const service = withStore(store);
    const { generationId } = await service.create('alice', { modelId: 'txt' });
    store.get = () => {
      throw new Error('the store broke');
    };
    let thrown: unknown;
    let read: Promise<unknown> | undefined;
    try {
      read = service.get('alice', generationId);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeUndefined();
    await expect(read).rejects.toThrow('the store broke');
    const res = await service.handle({ method: 'GET', path: `/v1/generations/${generationId}`, headers: { authorization: 'Bearer ka' } });
    expect(res.status).toBe(500);
    expect(JSON.parse(String(res.body))).toEqual({ error: { code: 'internal', message: 'Internal server error.' } });
  });

  it('a store answering with another library’s thenable is read as await would read it', async () => {
    const store = new MemoryGenerationStore();
    const service = withStore(store);
    const { generationId } = await service.create('alice', { modelId: 'txt' });
    const get = store.get.bind(store);
    store.get = ((id: string, owner: string) => ({ then: (ok: (v: unknown) => unknown, bad: (e: unknown) => unknown) => Promise.resolve(get(id, owner)).then(ok, bad) })) as never;
    expect(await service.get('alice', generationId)).toEqual({ status: 'pending' });
    await expect(service.get('bob', generationId)).rejects.toMatchObject({ code: 'not_found' });
  });
});
