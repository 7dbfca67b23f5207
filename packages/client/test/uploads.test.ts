// client.uploads against the real thing: core's service on the Express adapter, over a real socket.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import express from 'express';
import { MemoryApiKeyStore, MemoryLedger, createGenerationService, type GenerationService, type ModelProvider } from '@genservice/core';
import { genserviceRouter } from '@genservice/express';
import { GenServiceError, InvalidSettingsError, PayloadTooLargeError, createClient, type GenServiceClient } from '../src/index.js';

const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 7, 7, 7]);

/** Answers the bytes of its first image input, read as every model should read one (`ctx.files.fetch`). */
const provider: ModelProvider = {
  models: [
    {
      modelId: 'mirror',
      title: 'Mirror',
      resultType: 'image',
      estimatedGenerationTime: 0.05,
      settings: [{ name: 'images', title: 'Images', fieldType: 'image', required: true }],
      price: 1,
    },
  ],
  async generate(input, ctx) {
    const media = await ctx.files.fetch((input.settings.images as string[])[0]!, { signal: ctx.signal });
    return { bytes: media.bytes, mimeType: media.contentType ?? 'application/octet-stream' };
  },
};

let service: GenerationService;
let server: Server;
let baseUrl: string;
const client = (apiKey = 'alice-key'): GenServiceClient => createClient({ baseUrl, apiKey });

beforeAll(async () => {
  service = createGenerationService({
    providers: [provider],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'alice-key', userId: 'alice' }, { apiKey: 'bob-key', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 100, bob: 100 } }),
    trustRequestHost: true,
    uploads: { maxBytes: 64 },
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
  await new Promise((resolve) => server.close(resolve));
  await service.stop({ timeoutMs: 1000 });
});

describe('client.uploads.create', () => {
  it('uploads a Buffer (with contentType), a Blob and a File, and the owner runs a generation on each', async () => {
    const alice = client();
    const uploads = [
      await alice.uploads.create(Buffer.from(PNG), { contentType: 'image/png' }),
      await alice.uploads.create(new Blob([PNG], { type: 'image/png' })),
      await alice.uploads.create(new File([PNG], 'cat.png', { type: 'image/png' })),
    ];
    for (const upload of uploads) {
      expect(upload.url.startsWith(`${baseUrl}/v1/files/${encodeURIComponent(upload.id)}?`)).toBe(true);
      // The time the link stops working: the one its signed `exp` carries (seconds), as an ISO string.
      expect(upload.expiresAt).toBe(new Date(Number(new URL(upload.url).searchParams.get('exp')) * 1000).toISOString());
      const done = await alice.generations.run({ modelId: 'mirror', settings: { images: [upload.url] } }, { timeoutMs: 20_000 });
      const file = await fetch(done.result);
      expect(file.headers.get('content-type')).toBe('image/png');
      expect(new Uint8Array(await file.arrayBuffer())).toEqual(PNG);
    }
  });

  it("is refused as another user's input, with the input named", async () => {
    const upload = await client().uploads.create(new Blob([PNG], { type: 'image/png' }));
    const error = await client('bob-key').generations.create({ modelId: 'mirror', settings: { images: [upload.url] } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidSettingsError);
    expect((error as InvalidSettingsError).details?.[0]).toMatchObject({ field: 'settings.images.0', code: 'invalid_url' });
  });

  it('throws a TypeError for bytes without a content type, 415 for a type the service does not take, 413 over its size', async () => {
    const alice = client();
    await expect(alice.uploads.create(PNG)).rejects.toThrow(TypeError);
    const unsupported = await alice.uploads.create(new Blob(['hello'], { type: 'text/plain' })).catch((e: unknown) => e);
    expect(unsupported).toBeInstanceOf(GenServiceError);
    expect((unsupported as GenServiceError).status).toBe(415);
    expect((unsupported as GenServiceError).code).toBe('unsupported_media_type');
    await expect(alice.uploads.create(new Uint8Array(65), { contentType: 'image/png' })).rejects.toBeInstanceOf(PayloadTooLargeError);
  });
});
