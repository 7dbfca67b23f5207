import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ProviderError, silentLogger, type GenerationContext } from '@genservice/core/ports';
import { createReplicateProvider } from '../src/index.js';
import { retryAfterOf } from '../src/http.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

describe("an upstream's 429", () => {
  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterOf('7')).toBe(7000);
    expect(retryAfterOf(null)).toBeUndefined();
    expect(retryAfterOf('soon')).toBeUndefined();
    expect(retryAfterOf(new Date(0).toUTCString())).toBe(0);
  });

  it('is a retryable ProviderError carrying its Retry-After, and the provider carries its declared capacity', async () => {
    server = createServer((_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '12' }).end(JSON.stringify({ detail: 'Request was throttled.' }));
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const capacity = { lane: 'replicate:test', concurrency: 2, requestsPerMinute: 600 };
    const provider = createReplicateProvider({
      apiToken: 'r8_test',
      baseUrl: `http://127.0.0.1:${port}`,
      capacity,
      models: [{ modelId: 'flux', title: 'Flux', resultType: 'image', estimatedGenerationTime: 1, price: 5, settings: [], model: 'a/b' }],
    });
    expect(provider.capacity).toEqual(capacity);
    const ctx = { generationId: 'g1', signal: new AbortController().signal, deadline: 0, claim: 1, logger: silentLogger } as unknown as GenerationContext;
    const err = await provider.start({ model: provider.models[0]!, settings: {} }, ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ retryable: true, retryAfterMs: 12_000 });
  });
});
