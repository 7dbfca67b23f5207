import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { call, listen, type MountedServer } from '@genservice/testing';
import { genserviceRouter } from '../src/index.js';

const servers: MountedServer[] = [];
const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

const IMAGE = Uint8Array.from({ length: 300 }, (_, i) => (i * 13) & 0xff);

describe('express: POST /v1/uploads', () => {
  it('takes the raw bytes of an image, answers its signed URL on the mount, and serves the same bytes there', async () => {
    const service = createGenerationService({
      providers: [{ models: [], generate: async () => ({ text: '' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
      ledger: new MemoryLedger({ balances: { alice: 1 } }),
      trustRequestHost: true,
      uploads: { maxBytes: 1000 },
    });
    services.push(service);
    const app = express();
    app.use('/api', genserviceRouter(service));
    const server = await listen(app, '/api');
    servers.push(server);
    const created = await call(`${server.baseUrl}/v1/uploads`, { method: 'POST', headers: { authorization: 'Bearer ka', 'content-type': 'image/png' }, body: IMAGE });
    expect(created.status).toBe(201);
    const { url } = created.body as { id: string; url: string };
    expect(url.startsWith(`${server.baseUrl}/v1/files/`)).toBe(true);
    const file = await call(url);
    expect(file.status).toBe(200);
    expect(file.contentType).toBe('image/png');
    expect(file.bytes.equals(Buffer.from(IMAGE))).toBe(true);
    const big = await call(`${server.baseUrl}/v1/uploads`, { method: 'POST', headers: { authorization: 'Bearer ka', 'content-type': 'image/png' }, body: new Uint8Array(1001) });
    expect(big.status).toBe(413);
    const text = await call(`${server.baseUrl}/v1/uploads`, { method: 'POST', headers: { authorization: 'Bearer ka', 'content-type': 'text/plain' }, body: 'hello' });
    expect(text.status).toBe(415);
  });
});
