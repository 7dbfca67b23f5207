import { afterAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryBlobStore, MemoryGenerationStore, MemoryLedger, type GenerationService, type GenerationView, type Settings } from '@genservice/core';
import { ALWAYS_FAILS_MESSAGE, createDemoProvider } from '../src/index.js';
import { checkGlb, checkWav } from './structure.js';
import { checkMp4, checkPng } from './validate.js';
import { until } from '@genservice/testing';

/** The catalogue inside a real service: validation of its descriptors, billing, the failed shape, stored files. */
describe('demo models in a generation service', () => {
  const ledger = new MemoryLedger({ balances: { alice: 1000 } });
  const store = new MemoryGenerationStore();
  const blobs = new MemoryBlobStore();
  const service: GenerationService = createGenerationService({
    providers: [createDemoProvider({ speed: 0.01 })],
    ledger,
    store,
    blobs,
    publicUrl: 'http://demo.test/api',
  });
  afterAll(() => service.stop({ timeoutMs: 1000 }));

  async function finish(modelId: string, settings: Settings): Promise<{ id: string; view: GenerationView }> {
    const { generationId } = await service.create('alice', { modelId, settings });
    const view = await until(() => service.get('alice', generationId), { accept: (v) => v.status === 'completed' || v.status === 'failed', timeoutMs: 10_000, intervalMs: 10 });
    return { id: generationId, view };
  }

  async function file(id: string): Promise<{ bytes: Uint8Array; mimeType: string }> {
    const record = await store.get(id, 'alice');
    const blob = await blobs.get(record?.resultKey as string);
    if (!blob) throw new Error('no stored file');
    return blob;
  }

  it('lists the models with descriptors core accepts', () => {
    expect(service.listModels().map((m) => m.modelId)).toContain('demo-image-remix');
  });

  it('completes each model with a stored file of the right type, charging its price', async () => {
    await service.start();
    const cases: Array<[string, Settings, string, (b: Uint8Array) => unknown, number]> = [
      ['demo-image', { prompt: 'a lighthouse', size: '512x512' }, 'image/png', checkPng, 8],
      ['demo-video', { prompt: 'a lighthouse' }, 'video/mp4', checkMp4, 20],
      ['demo-audio', { prompt: 'a lighthouse' }, 'audio/wav', checkWav, 4],
      ['demo-3d', { prompt: 'a lighthouse', shape: 'cone' }, 'model/gltf-binary', checkGlb, 8],
    ];
    for (const [modelId, settings, mimeType, check, price] of cases) {
      const { id, view } = await finish(modelId, settings);
      expect(view, modelId).toMatchObject({ status: 'completed', price, result: expect.stringMatching(/^http:\/\/demo\.test\/api\/v1\/files\//) });
      const stored = await file(id);
      expect(stored.mimeType).toBe(mimeType);
      check(stored.bytes);
    }
    const text = await finish('demo-text', { prompt: 'a lighthouse' });
    expect(text.view).toMatchObject({ status: 'completed', price: 1, result: expect.stringContaining('lighthouse') });
  });

  it('the always-failing model ends failed with its failure fee, and its details say it fails on purpose', async () => {
    const before = await service.balance('alice');
    const { id, view } = await finish('demo-always-fails', { prompt: 'x' });
    expect(view).toEqual({ status: 'failed', price: 2 });
    expect(await service.balance('alice')).toBe(before - 2);
    expect((await service.details('alice', id)).error).toEqual({ code: 'provider_error', message: ALWAYS_FAILS_MESSAGE });
  });

  it('a refused input URL fails the remix without charging for a result, and its details name the input and why', async () => {
    const { id, view } = await finish('demo-image-remix', { prompt: 'x', images: ['http://169.254.169.254/latest/meta-data/?token=secret'] });
    expect(view).toEqual({ status: 'failed', price: 0 });
    expect((await store.get(id, 'alice'))?.failureReason).toMatch(/refusing to fetch/);
    const { error } = await service.details('alice', id);
    expect(error).toEqual({ code: 'invalid_input', message: expect.stringMatching(/^Input image 1 could not be used: refusing to fetch http:\/\/169\.254\.169\.254\/latest\/meta-data\/: /) });
    // The query (a token, say) is not repeated to anyone.
    expect(error!.message).not.toContain('secret');
  });

  it('settings outside the descriptors are refused before anything is charged', async () => {
    await expect(service.create('alice', { modelId: 'demo-image', settings: { prompt: 'x', size: '9x9' } })).rejects.toMatchObject({ code: 'invalid_settings' });
    await expect(service.create('alice', { modelId: 'demo-image', settings: {} })).rejects.toMatchObject({ code: 'invalid_settings' });
  });
});
