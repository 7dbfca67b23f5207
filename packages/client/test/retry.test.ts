// Retries of safe requests, the API key from the environment and the /v1 hint, against real loopback servers: a
// node:http server that fails the first N requests (503s, 429s with and without Retry-After, dropped connections),
// and core's own service mounted on Express. The waits between tries go through an injected sleep that records them
// and resolves at once: the delays are asserted as numbers, never as time passing.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService, type ModelProvider } from '@genservice/core';
import { genserviceRouter } from '@genservice/express';
import {
  ConnectionError,
  createClient,
  InternalServerError,
  NotFoundError,
  RateLimitedError,
  ServiceUnavailableError,
  type ClientOptions,
  type RetryOptions,
} from '../src/index.js';

type Failure = { status: number; headers?: Record<string, string> } | 'drop';

/** What the flaky server saw: each request's method, path, Authorization and Idempotency-Key. */
interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
}

/** A server that answers the next failures in order (then 200s): `fail(...)` queues them. */
const failures: Failure[] = [];
const seen: Seen[] = [];
let server: Server;
let base: string;

function answer(req: IncomingMessage, res: ServerResponse): void {
  seen.push({
    method: req.method ?? '',
    path: req.url ?? '',
    authorization: req.headers.authorization,
    idempotencyKey: req.headers['idempotency-key'] as string | undefined,
  });
  req.resume();
  req.on('end', () => {
    const failure = failures.shift();
    if (failure === 'drop') return void req.socket.destroy();
    if (failure) {
      res.writeHead(failure.status, { 'content-type': 'application/json', ...failure.headers });
      const code = { 404: 'not_found', 429: 'rate_limited', 500: 'internal' }[failure.status] ?? 'unavailable';
      return void res.end(JSON.stringify({ error: { code, message: `failed with ${failure.status}` } }));
    }
    res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(req.url === '/v1/balance' ? { balance: 7 } : { generationId: 'gen-1' }));
  });
}

beforeAll(async () => {
  server = createServer(answer);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  failures.length = 0;
  seen.length = 0;
});

/** A client whose waits are recorded (and not waited). */
function recording(retry: Omit<RetryOptions, 'sleep'> | false | undefined, extra: Partial<ClientOptions> = {}) {
  const delays: number[] = [];
  const sleep = async (ms: number): Promise<void> => {
    delays.push(ms);
  };
  const client = createClient({ baseUrl: base, apiKey: 'key', ...(retry === false ? { retry } : { retry: { ...retry, sleep } }), ...extra });
  return { client, delays };
}

describe('retries (on by default)', () => {
  it('a GET is tried again after 503s and a dropped connection, 500 ms then 1 s apart by default, and answers', async () => {
    failures.push({ status: 503 }, 'drop');
    const { client, delays } = recording(undefined);
    await expect(client.balance()).resolves.toEqual({ balance: 7 });
    expect(seen.map((s) => s.path)).toEqual(['/v1/balance', '/v1/balance', '/v1/balance']);
    expect(delays).toEqual([500, 1000]);
  });

  it('gives up after `attempts` tries with the last error; the delays double from baseDelayMs', async () => {
    failures.push({ status: 502 }, { status: 504 }, { status: 503 }, { status: 503 });
    const { client, delays } = recording({ attempts: 3, baseDelayMs: 100 });
    await expect(client.balance()).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(seen).toHaveLength(3);
    expect(delays).toEqual([100, 200]);
    // The fourth failure is still queued: nobody asked for it.
    expect(failures).toEqual([{ status: 503 }]);
  });

  it('waits what a 429 Retry-After says (when longer than the backoff); a 429 without it is not tried again', async () => {
    failures.push({ status: 429, headers: { 'retry-after': '2' } });
    const { client, delays } = recording({ baseDelayMs: 100 });
    await expect(client.balance()).resolves.toEqual({ balance: 7 });
    expect(delays).toEqual([2000]);
    expect(seen).toHaveLength(2);

    seen.length = 0;
    failures.push({ status: 429 });
    await expect(client.balance()).rejects.toBeInstanceOf(RateLimitedError);
    expect(seen).toHaveLength(1);
  });

  it('a 503 Retry-After is a floor too, and one beyond maxDelayMs is not waited for', async () => {
    failures.push({ status: 503, headers: { 'retry-after': '1' } });
    const { client, delays } = recording({ baseDelayMs: 10, maxDelayMs: 5000 });
    await expect(client.balance()).resolves.toEqual({ balance: 7 });
    expect(delays).toEqual([1000]);

    seen.length = 0;
    failures.push({ status: 503, headers: { 'retry-after': '60' } });
    await expect(client.balance()).rejects.toMatchObject({ name: 'ServiceUnavailableError', retryAfterMs: 60_000 });
    expect(seen).toHaveLength(1);
    expect(delays).toEqual([1000]);
  });

  it('never tries again after a 500 or any 4xx but a timed 429', async () => {
    failures.push({ status: 500 });
    const { client, delays } = recording({});
    await expect(client.balance()).rejects.toBeInstanceOf(InternalServerError);
    failures.push({ status: 404 });
    await expect(client.balance()).rejects.toBeInstanceOf(NotFoundError);
    expect(seen).toHaveLength(2);
    expect(delays).toEqual([]);
  });

  it('a create is tried again only with an Idempotency-Key, the same key each time', async () => {
    const { client, delays } = recording({ baseDelayMs: 50 });
    failures.push({ status: 503 });
    await expect(client.generations.create({ modelId: 'm' })).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(seen).toHaveLength(1);

    seen.length = 0;
    failures.push('drop', { status: 503 });
    await expect(client.generations.create({ modelId: 'm' }, { idempotencyKey: 'key-42' })).resolves.toEqual({ generationId: 'gen-1' });
    expect(seen.map((s) => [s.method, s.path, s.idempotencyKey])).toEqual([
      ['POST', '/v1/generations', 'key-42'],
      ['POST', '/v1/generations', 'key-42'],
      ['POST', '/v1/generations', 'key-42'],
    ]);
    expect(delays).toEqual([50, 100]);

    // A batch with a key too.
    seen.length = 0;
    failures.push({ status: 502 });
    await client.batches.create({ requests: [{ modelId: 'm' }] }, { idempotencyKey: 'batch-1' }).catch(() => undefined);
    expect(seen.map((s) => [s.path, s.idempotencyKey])).toEqual([
      ['/v1/batches', 'batch-1'],
      ['/v1/batches', 'batch-1'],
    ]);
  });

  it('retry: false sends each request once', async () => {
    failures.push({ status: 503 });
    const { client } = recording(false);
    await expect(client.balance()).rejects.toBeInstanceOf(ServiceUnavailableError);
    failures.push('drop');
    await expect(client.balance()).rejects.toBeInstanceOf(ConnectionError);
    expect(seen).toHaveLength(2);
  });

  it("an abort during the wait ends the call with the caller's reason, and nothing more is sent", async () => {
    failures.push({ status: 503 });
    const controller = new AbortController();
    const reason = new Error('stop');
    const client = createClient({
      baseUrl: base,
      apiKey: 'key',
      retry: {
        // The wait starts, the caller aborts, the wait rejects as a timer's would.
        sleep: (_ms, signal) =>
          new Promise((_resolve, reject) => {
            signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
            controller.abort(reason);
          }),
      },
    });
    await expect(client.balance({ signal: controller.signal })).rejects.toBe(reason);
    expect(seen).toHaveLength(1);
  });

  it('refuses a retry policy that makes no sense', () => {
    expect(() => createClient({ baseUrl: base, apiKey: 'k', retry: { attempts: 0 } })).toThrow(TypeError);
    expect(() => createClient({ baseUrl: base, apiKey: 'k', retry: { baseDelayMs: -1 } })).toThrow(TypeError);
  });
});

describe('the API key from GENSERVICE_API_KEY', () => {
  const saved = process.env.GENSERVICE_API_KEY;
  afterEach(() => {
    if (saved === undefined) delete process.env.GENSERVICE_API_KEY;
    else process.env.GENSERVICE_API_KEY = saved;
  });

  it('is sent when no apiKey is given; a given one wins; without either createClient throws, naming the variable', async () => {
    process.env.GENSERVICE_API_KEY = 'from-the-environment';
    await createClient({ baseUrl: base }).balance();
    await createClient({ baseUrl: base, apiKey: 'given' }).balance();
    expect(seen.map((s) => s.authorization)).toEqual(['Bearer from-the-environment', 'Bearer given']);
    delete process.env.GENSERVICE_API_KEY;
    expect(() => createClient({ baseUrl: base })).toThrow(/GENSERVICE_API_KEY/);
  });

  it('is not looked for where there is no process (a browser): createClient throws instead of failing on `process`', () => {
    process.env.GENSERVICE_API_KEY = 'from-the-environment';
    const proc = globalThis.process;
    // As in a browser bundle: no `process` global at all.
    Object.defineProperty(globalThis, 'process', { value: undefined, configurable: true, writable: true });
    let error: unknown;
    try {
      createClient({ baseUrl: base });
    } catch (e) {
      error = e;
    } finally {
      Object.defineProperty(globalThis, 'process', { value: proc, configurable: true, writable: true });
    }
    expect(error).toBeInstanceOf(TypeError);
    expect(String(error)).toContain('apiKey is required');
  });
});

describe('a baseUrl that ends in /v1', () => {
  const provider: ModelProvider = {
    models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 0.05, settings: [], price: 1 }],
    generate: async () => ({ text: 'ok' }),
  };
  let service: GenerationService;
  let host: Server;
  let origin: string;
  beforeAll(async () => {
    service = createGenerationService({
      providers: [provider],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'alice', userId: 'alice' }] }),
      ledger: new MemoryLedger({ balances: { alice: 5 } }),
    });
    await service.start();
    const app = express();
    app.use('/gen', genserviceRouter(service));
    // A service really mounted at /v1: its baseUrl ends in /v1 and is right.
    app.use('/v1', genserviceRouter(service));
    host = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => host.once('listening', resolve));
    origin = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    host.closeAllConnections();
    await new Promise((resolve) => host.close(resolve));
    await service.stop();
  });

  it('turns the bare "No such endpoint." into a hint naming the baseUrl to use', async () => {
    const error = await createClient({ baseUrl: `${origin}/gen/v1/`, apiKey: 'alice' })
      .balance()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as NotFoundError).message).toBe(
      `No such endpoint. The client's baseUrl "${origin}/gen/v1" ends in /v1, and the client adds /v1 to every path: give the mount point without /v1 ("${origin}/gen").`,
    );
    expect(error).toMatchObject({ status: 404, code: 'not_found' });
    await expect(createClient({ baseUrl: `${origin}/gen`, apiKey: 'alice' }).balance()).resolves.toEqual({ balance: 5 });
  });

  it('leaves a real not-found alone, also through a mount that is /v1', async () => {
    const client = createClient({ baseUrl: `${origin}/v1`, apiKey: 'alice' });
    await expect(client.balance()).resolves.toEqual({ balance: 5 });
    const error = await client.generations.get('gen_nope').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as Error).message).not.toContain('baseUrl');
  });
});
