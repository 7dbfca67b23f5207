import { afterAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryBlobStore, MemoryLedger, type GenerationService, type GenerationView, type Settings } from '@genservice/core';
import { until } from '@genservice/testing';
import { createDemoProvider, encodePng } from '../src/index.js';
import { checkPng } from './validate.js';

/**
 * demo-image-remix on uploads, in a service whose own address is loopback (port 9, where nothing answers) and whose
 * demo provider refuses private addresses: its own files are read from the blob store, never over HTTP.
 */
describe('demo-image-remix on uploaded inputs', () => {
  const blobs = new MemoryBlobStore();
  const service: GenerationService = createGenerationService({
    providers: [createDemoProvider({ speed: 0.01, imageWorkers: 0 })],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    ledger: new MemoryLedger({ balances: { alice: 1000 } }),
    blobs,
    publicUrl: 'http://127.0.0.1:9/api',
  });
  afterAll(() => service.stop({ timeoutMs: 1000 }));

  const png = encodePng({ width: 16, height: 16, data: new Uint8Array(16 * 16 * 4).map((_, i) => (i * 37) & 0xff) });
  async function upload(): Promise<{ id: string; url: string }> {
    const res = await service.handle({ method: 'POST', path: '/v1/uploads', headers: { authorization: 'Bearer ka', 'content-type': 'image/png' }, body: png });
    expect(res.status).toBe(201);
    return JSON.parse(String(res.body)) as { id: string; url: string };
  }
  async function finish(settings: Settings): Promise<{ id: string; view: GenerationView }> {
    const { generationId } = await service.create('alice', { modelId: 'demo-image-remix', settings });
    const view = await until(() => service.get('alice', generationId), { accept: (v) => v.status === 'completed' || v.status === 'failed', timeoutMs: 10_000, intervalMs: 10 });
    return { id: generationId, view };
  }

  it('remixes an upload, and then its own result', async () => {
    await service.start();
    const { url } = await upload();
    const first = await finish({ prompt: 'dusk', images: [url], size: '256x256' });
    expect(first.view).toMatchObject({ status: 'completed', price: 6 });
    const result = (first.view as { result: string }).result;
    checkPng((await blobs.get(new URL(result).pathname.split('/').pop()!))!.bytes);
    const second = await finish({ prompt: 'again', images: [result, url] });
    expect(second.view).toMatchObject({ status: 'completed' });
  });

  it('names the input it could not use when an upload is gone before the run (its link without the signature)', async () => {
    const kept = await upload();
    const gone = await upload();
    await blobs.delete(gone.id);
    const { id, view } = await finish({ prompt: 'x', images: [kept.url, gone.url] });
    expect(view).toEqual({ status: 'failed', price: 0 });
    const { error } = await service.details('alice', id);
    expect(error).toEqual({
      code: 'invalid_input',
      message: `Input image 2 could not be used: http://127.0.0.1:9/api/v1/files/${gone.id} is gone (the upload expired or its generation was deleted).`,
    });
  });
});
