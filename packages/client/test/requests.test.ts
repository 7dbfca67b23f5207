import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createClient } from '../src/index.js';
import { fakeServer, json, model } from './helpers.js';

describe('requests', () => {
  it('lists models', async () => {
    const models = [model('a', 1), model('b', 2)];
    const { client, calls } = fakeServer(() => json(200, { models }));
    await expect(client.models.list()).resolves.toEqual(models);
    expect(calls[0]).toMatchObject({ method: 'GET', url: 'https://api.test/v1/models' });
    expect(calls[0].headers).toMatchObject({ authorization: 'Bearer key-1', accept: 'application/json' });
    expect(calls[0].headers['user-agent']).toMatch(/^genservice-client\//);
  });

  it('creates with a JSON body and an optional Idempotency-Key', async () => {
    const { client, calls } = fakeServer(() => json(201, { generationId: 'g-1' }));
    await expect(client.generations.create({ modelId: 'm', settings: { prompt: 'hi' } })).resolves.toEqual({
      generationId: 'g-1',
    });
    await client.generations.create({ modelId: 'm' }, { idempotencyKey: 'k-1' });
    await client.generations.create({ modelId: 'm', expiresAfterSeconds: 600 });
    expect(calls[0]).toMatchObject({ method: 'POST', path: '/v1/generations', body: { modelId: 'm', settings: { prompt: 'hi' } } });
    expect(calls[1].body).toEqual({ modelId: 'm' });
    expect(calls[2].body).toEqual({ modelId: 'm', expiresAfterSeconds: 600 });
    expect(calls[0].headers['content-type']).toBe('application/json');
    expect(calls[0].headers['idempotency-key']).toBeUndefined();
    expect(calls[1].headers['idempotency-key']).toBe('k-1');
  });

  it('reads each generation shape, adding the id', async () => {
    const bodies = [
      { status: 'pending' },
      { status: 'processing' },
      { status: 'completed', result: 'https://x/f.png', price: 3 },
      { status: 'failed', price: 0 },
    ];
    let i = 0;
    const { client, calls } = fakeServer(() => json(200, bodies[i++]));
    const got = [];
    for (let n = 0; n < bodies.length; n++) got.push(await client.generations.get('a/b c'));
    expect(got).toEqual(bodies.map((b) => ({ generationId: 'a/b c', ...b })));
    // Ids are escaped so that one can never address another route.
    expect(calls[0].path).toBe('/v1/generations/a%2Fb%20c');
  });

  it('rejects a completed generation without result or price as an invalid response', async () => {
    const { client } = fakeServer(() => json(200, { status: 'completed', price: 1 }));
    await expect(client.generations.get('g')).rejects.toMatchObject({ code: 'invalid_response' });
    const other = fakeServer(() => json(200, { status: 'failed' }));
    await expect(other.client.generations.get('g')).rejects.toMatchObject({ code: 'invalid_response' });
  });

  it('cancels, passing through whether this call cancelled it', async () => {
    const { client, calls } = fakeServer(() => json(200, { status: 'failed', price: 0, cancelled: true }));
    await expect(client.generations.cancel('g1')).resolves.toEqual({
      generationId: 'g1',
      status: 'failed',
      price: 0,
      cancelled: true,
    });
    expect(calls[0]).toMatchObject({ method: 'POST', path: '/v1/generations/g1/cancel' });
  });

  it('reads the balance', async () => {
    const { client, calls } = fakeServer(() => json(200, { balance: 97 }));
    await expect(client.balance()).resolves.toEqual({ balance: 97 });
    expect(calls[0].path).toBe('/v1/balance');
  });

  it('keeps a base URL path prefix and drops trailing slashes', async () => {
    const urls: string[] = [];
    const client = createClient({
      baseUrl: 'https://h.test/api/gen//',
      apiKey: 'k',
      userAgent: 'my-app/2',
      fetch: async (url, init) => {
        urls.push(url);
        expect(new Headers(init.headers).get('user-agent')).toBe('my-app/2');
        return json(200, { balance: 1 });
      },
    });
    await client.balance();
    expect(urls).toEqual(['https://h.test/api/gen/v1/balance']);
  });

  it('requires baseUrl and apiKey', () => {
    expect(() => createClient({ baseUrl: '', apiKey: 'k' })).toThrow(TypeError);
    expect(() => createClient({ baseUrl: 'https://x', apiKey: '' })).toThrow(TypeError);
  });

  it('uses the global fetch when none is given, looked up at call time', async () => {
    const original = globalThis.fetch;
    globalThis.fetch = (async () => json(200, { balance: 5 })) as typeof fetch;
    try {
      const client = createClient({ baseUrl: 'https://x', apiKey: 'k' });
      await expect(client.balance()).resolves.toEqual({ balance: 5 });
    } finally {
      globalThis.fetch = original;
    }
  });

  it('abandons a request that gets no answer within requestTimeoutMs as a ConnectionError', async () => {
    const { client } = fakeServer(
      (r) => new Promise((_res, rej) => r.signal?.addEventListener('abort', () => rej(r.signal?.reason))),
      { clientOptions: { requestTimeoutMs: 30 } },
    );
    await expect(client.balance()).rejects.toMatchObject({ name: 'ConnectionError', message: expect.stringContaining('30 ms') });
  });
});

describe('browser safety', () => {
  it('src imports nothing from Node and uses no Node globals', () => {
    const dir = fileURLToPath(new URL('../src/', import.meta.url));
    for (const file of readdirSync(dir)) {
      const text = readFileSync(dir + file, 'utf8');
      expect(text, file).not.toMatch(/from ['"](node:|fs|path|http|https|crypto|url|events|stream|buffer)['"]/);
      expect(text, file).not.toMatch(/\b(Buffer|require|__dirname|setImmediate)\b/);
    }
  });
});
