import { createFal } from '@ai-sdk/fal';
import { createReplicate } from '@ai-sdk/replicate';
import { createGenerationService, MemoryBlobStore, MemoryGenerationStore, MemoryLedger, type GenerationService } from '@genservice/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAiSdkProvider, createGuardedFetch } from '../src/index.js';
import { FakeUpstream, JPEG, MP4, PNG, recordingLogger, runToEnd } from './fake-upstream.js';

const upstream = new FakeUpstream();
const { logger } = recordingLogger();
const store = new MemoryGenerationStore();
const blobs = new MemoryBlobStore();
let service: GenerationService;
const storedFile = async (generationId: string) => blobs.get((await store.get(generationId, 'u'))!.resultKey!);
const lastJson = (path: string): Record<string, unknown> => JSON.parse(upstream.to(path).at(-1)!.body.toString('utf8'));

/** fal's video models post to https://queue.fal.run whatever the baseURL: a `fetch` sends them here instead. */
const toUpstream: typeof fetch = (input, init) => fetch(String(input instanceof Request ? input.url : input).replace('https://queue.fal.run', upstream.base), init);

beforeAll(async () => {
  await upstream.start();
  const fal = createFal({ apiKey: 'fal-test-secret', baseURL: upstream.base, fetch: toUpstream });
  // Every request of this one (API calls and fal's own download of the image URL) goes through the guard: the API
  // host is trusted by name, any other private address is refused.
  const guarded = createFal({
    apiKey: 'fal-test-secret',
    baseURL: `http://localhost:${upstream.port}`,
    fetch: createGuardedFetch({ trustedHosts: ['localhost'], lookup: async () => [{ address: '127.0.0.1', family: 4 }], maxBytes: 1_000_000 }),
  });
  const replicate = createReplicate({ apiToken: 'r8_test_secret', baseURL: upstream.base });
  const fast = { estimatedGenerationTime: 0.05, maxAttempts: 2 };
  service = createGenerationService({
    providers: [
      createAiSdkProvider({
        media: { allowPrivateNetworks: true },
        models: [
          { modelId: 'flux', title: 'Flux on fal', model: fal.image('fal-ai/flux/schnell'), price: 3, aspectRatios: ['1:1', '16:9'], ...fast },
          { modelId: 'flux-guarded', title: 'Flux, guarded fetch', model: guarded.image('fal-ai/flux/schnell'), price: 3, ...fast },
          { modelId: 'elsewhere-guarded', title: 'Result elsewhere', model: guarded.image('fal-ai/elsewhere'), price: 3, ...fast },
          { modelId: 'replicate-flux', title: 'Flux on Replicate', model: replicate.image('black-forest-labs/flux-schnell'), price: 3, aspectRatios: ['1:1'], ...fast },
          {
            modelId: 'luma',
            title: 'Luma on fal',
            model: fal.video('luma-dream-machine'),
            price: 20,
            aspectRatios: ['16:9', '9:16'],
            durations: [5, 9],
            acceptsImage: true,
            ...fast,
          },
        ],
      }),
      createAiSdkProvider({
        // Media settings may come from the private network here, result URLs may not.
        media: { allowPrivateNetworks: true },
        results: { allowPrivateNetworks: false },
        models: [{ modelId: 'luma-strict', title: 'Luma, strict results', model: fal.video('luma-dream-machine'), price: 20, ...fast }],
      }),
    ],
    store,
    blobs,
    ledger: new MemoryLedger({ balances: { u: 10_000 } }),
    publicUrl: 'http://api.test',
    runner: { retryBaseDelayMs: 5, retryMaxDelayMs: 20 },
    recovery: { intervalMs: 0 },
    logger,
  });
  await service.start();
});

afterAll(async () => {
  await service.stop({ timeoutMs: 1000 });
  await upstream.close();
});

describe('@ai-sdk/fal and @ai-sdk/replicate models through a real genservice (fake fal.run, queue.fal.run, api.replicate.com on 127.0.0.1)', () => {
  it('image: the fal answer is stored as image/png, the aspect ratio sent as fal image_size', async () => {
    const d = await runToEnd(service, 'flux', { prompt: 'a fox', aspect_ratio: '16:9', seed: '11' });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    const f = await storedFile(d.generationId);
    expect(f?.mimeType).toBe('image/png');
    expect(Buffer.from(f!.bytes).equals(Buffer.from(PNG))).toBe(true);
    const request = upstream.to('/fal-ai/flux/schnell').at(-1)!;
    expect(request.authorization).toBe('Key fal-test-secret');
    expect(JSON.parse(request.body.toString())).toMatchObject({ prompt: 'a fox', seed: 11, num_images: 1, image_size: 'landscape_16_9' });
  });

  it('image with createGuardedFetch: the API call and fal\u2019s own download of the result go through the guard', async () => {
    const d = await runToEnd(service, 'flux-guarded', { prompt: 'guarded' });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    expect((await storedFile(d.generationId))?.mimeType).toBe('image/png');
    expect(upstream.to('/files/result.png').at(-1)!.host).toBe(`localhost:${upstream.port}`);
  });

  it('image with createGuardedFetch: a result URL on a private address is refused, not retried', async () => {
    const downloads = upstream.to('/files/result.png').length;
    const calls = upstream.to('/fal-ai/elsewhere').length;
    const d = await runToEnd(service, 'elsewhere-guarded', { prompt: 'x' });
    expect(d.error).toEqual({ code: 'provider_error', message: 'A request of the model provider was refused or failed (blocked_address).' });
    expect(upstream.to('/files/result.png').length).toBe(downloads);
    expect(upstream.to('/fal-ai/elsewhere').length - calls).toBe(1);
  });

  it('replicate image: the prediction output is downloaded and stored, its MIME type sniffed (image/jpeg)', async () => {
    const d = await runToEnd(service, 'replicate-flux', { prompt: 'a heron', aspect_ratio: '1:1' });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    const f = await storedFile(d.generationId);
    // Neither the model nor the file server (application/octet-stream) says what it is: the bytes do.
    expect(f?.mimeType).toBe('image/jpeg');
    expect(Buffer.from(f!.bytes).equals(JPEG)).toBe(true);
    const request = upstream.to('/models/black-forest-labs/flux-schnell/predictions').at(-1)!;
    expect(request.authorization).toBe('Bearer r8_test_secret');
    expect(JSON.parse(request.body.toString())).toMatchObject({ input: { prompt: 'a heron', aspect_ratio: '1:1', num_outputs: 1 } });
  });

  it('video: submitted to the queue, the result URL downloaded through the guard and stored as video/mp4', async () => {
    const d = await runToEnd(service, 'luma', { prompt: 'waves', aspect_ratio: '16:9', duration: '5', image: [`${upstream.base}/files/input.png`] });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    const f = await storedFile(d.generationId);
    // The file server says application/octet-stream; the model said video/mp4.
    expect(f?.mimeType).toBe('video/mp4');
    expect(Buffer.from(f!.bytes).equals(MP4)).toBe(true);
    const submitted = lastJson('/fal-ai/luma-dream-machine');
    expect(submitted).toMatchObject({ prompt: 'waves', aspect_ratio: '16:9', duration: '5s' });
    expect(String(submitted.image_url)).toBe(`data:image/png;base64,${Buffer.from(PNG).toString('base64')}`);
    expect(service.listModels().find((m) => m.modelId === 'luma')).toMatchObject({
      resultType: 'video',
      settings: [
        { name: 'prompt' },
        { name: 'aspect_ratio', options: ['16:9', '9:16'] },
        { name: 'duration', options: ['5', '9'] },
        { name: 'seed' },
        { name: 'image', fieldType: 'image' },
      ],
    });
  });

  it('video: a result URL on a private address is refused unless the host allows private networks for results', async () => {
    const downloads = upstream.to('/files/result.mp4').length;
    const d = await runToEnd(service, 'luma-strict', { prompt: 'waves' });
    expect(d.error).toEqual({ code: 'provider_error', message: "The model's result could not be downloaded (blocked_address)." });
    expect(upstream.to('/files/result.mp4').length).toBe(downloads);
  });
});
