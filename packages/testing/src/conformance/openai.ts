import { randomBytes } from 'node:crypto';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService } from '@genservice/core';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScriptedProvider, fakeModel, fileScript } from '../fakes.js';
import { call } from './http.js';
import type { MountFn, MountOptions, MountedServer } from './types.js';

/**
 * The OpenAI-compatible surface (issue 39) on every adapter, with the official `openai` SDK (v6, an optional peer
 * dependency of this package: install it to run the suite) as the client: models, images (b64, url, a stream of
 * partial images, a multipart edit whose upload the model reads back through its signed file URL), videos (create,
 * long-poll, download with Range, list, delete), speech, errors in OpenAI's shape, one charge per Idempotency-Key,
 * and the surface off (404).
 */

const IMAGE = Uint8Array.from({ length: 2000 }, (_, i) => (i * 11 + (i >> 7)) % 256);
const PREVIEW = Uint8Array.from({ length: 80 }, (_, i) => (i * 5) % 256);
const VIDEO = Uint8Array.from({ length: 1200 }, (_, i) => (255 - i) % 256);
const AUDIO = Uint8Array.from({ length: 700 }, (_, i) => (i * 3) % 256);

/** The models of the suite's service, each mapping OpenAI's fields as a host's would. */
function openAiModels() {
  const prompt = { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true } as const;
  return [
    fakeModel({ modelId: 'oa-image', title: 'Image with a preview', resultType: 'image', price: 4, settings: [prompt, { name: 'size', title: 'Size', fieldType: 'select', options: ['64x64', '128x128'] }] }),
    fakeModel({ modelId: 'oa-edit', title: 'Returns its input images', resultType: 'image', price: 3, settings: [prompt, { name: 'images', title: 'Images', fieldType: 'image', required: true }] }),
    fakeModel({
      modelId: 'oa-video',
      title: 'Video',
      resultType: 'video',
      price: 10,
      settings: [prompt, { name: 'duration', title: 'Seconds', fieldType: 'select', options: ['2', '4'] }, { name: 'size', title: 'Size', fieldType: 'select', options: ['160x120'] }],
      openai: { params: { seconds: 'duration' } },
    }),
    fakeModel({
      modelId: 'oa-audio',
      title: 'Audio',
      resultType: 'audio',
      price: 2,
      settings: [prompt, { name: 'instrument', title: 'Instrument', fieldType: 'select', options: ['sine', 'pluck'] }],
      openai: { params: { input: 'prompt', voice: 'instrument' } },
    }),
  ];
}

interface OpenAiFixture {
  service: GenerationService;
  server: MountedServer;
  ledger: MemoryLedger;
  user(balance: number): Promise<{ userId: string; key: string; sdk: OpenAI }>;
}

async function openAiFixture(mount: MountFn, mode: MountOptions, enabled: boolean): Promise<OpenAiFixture> {
  const { default: OpenAIClient } = await import('openai');
  const provider = createScriptedProvider({
    models: openAiModels(),
    scripts: {
      'oa-image': (_input, ctx) => {
        ctx.output.preview(PREVIEW, 'image/png');
        return { bytes: IMAGE, mimeType: 'image/png' };
      },
      // The model reads each upload back through the URL it was given: what it returns is what it could read.
      'oa-edit': async (input) => {
        const parts = await Promise.all((input.settings.images as string[]).map(async (url) => new Uint8Array(await (await fetch(url)).arrayBuffer())));
        return { bytes: Buffer.concat(parts), mimeType: 'image/png' };
      },
      'oa-video': fileScript(VIDEO, 'video/mp4', 'put'),
      'oa-audio': fileScript(AUDIO, 'audio/wav'),
    },
  });
  const keys = new MemoryApiKeyStore();
  const ledger = new MemoryLedger();
  const service = createGenerationService({
    providers: [provider],
    apiKeys: keys,
    ledger,
    trustRequestHost: true,
    recovery: { intervalMs: 0 },
    ...(enabled ? { openai: { enabled: true, maxWaitSeconds: 30 } } : {}),
  });
  await service.start();
  const server = await mount(service, mode);
  const base = server.baseUrl.replace(/\/+$/, '');
  return {
    service,
    server,
    ledger,
    async user(balance) {
      const userId = `oa-${randomBytes(6).toString('hex')}`;
      const key = `gs_oa_${randomBytes(18).toString('base64url')}`;
      await keys.addKey(key, userId);
      if (balance > 0) await ledger.credit(userId, balance);
      return { userId, key, sdk: new OpenAIClient({ apiKey: key, baseURL: `${base}/openai/v1`, maxRetries: 0 }) };
    },
  };
}

/** The OpenAI surface's tests in one mount mode of an adapter (see `runConformanceSuite`). */
export function defineOpenAiTests(mount: MountFn, mode: MountOptions): void {
  describe('the OpenAI-compatible surface (issue 39)', () => {
    let fx: OpenAiFixture;
    beforeAll(async () => {
      fx = await openAiFixture(mount, mode, true);
    });
    afterAll(async () => {
      await fx?.server.close();
      await fx?.service.stop({ timeoutMs: 2000 });
    });

    it('models, images as b64_json and as a signed url, a stream of the partial image, one charge each', async () => {
      const { userId, sdk } = await fx.user(100);
      const ids = (await sdk.models.list()).data.map((m) => m.id);
      expect(ids).toEqual(['oa-image', 'oa-edit', 'oa-video', 'oa-audio']);
      const b64 = await sdk.images.generate({ model: 'oa-image', prompt: 'a', size: '64x64' });
      expect(Buffer.from(b64.data![0]!.b64_json!, 'base64')).toEqual(Buffer.from(IMAGE));
      const url = await sdk.images.generate({ model: 'oa-image', prompt: 'a', response_format: 'url' });
      expect(Buffer.from(await (await fetch(url.data![0]!.url!)).arrayBuffer())).toEqual(Buffer.from(IMAGE));
      const stream = await sdk.images.generate({ model: 'oa-image', prompt: 'a', stream: true, partial_images: 1 });
      const events: OpenAI.ImageGenStreamEvent[] = [];
      for await (const e of stream) events.push(e);
      expect(events.map((e) => e.type)).toEqual(['image_generation.partial_image', 'image_generation.completed']);
      expect(Buffer.from(events[0]!.b64_json, 'base64')).toEqual(Buffer.from(PREVIEW));
      expect(Buffer.from(events[1]!.b64_json, 'base64')).toEqual(Buffer.from(IMAGE));
      expect(await fx.ledger.balance(userId)).toBe(100 - 3 * 4);
    });

    it('images.edit: the multipart upload reaches the model as a URL it can read', async () => {
      const { toFile } = await import('openai');
      const { sdk } = await fx.user(100);
      const a = Uint8Array.from({ length: 300 }, (_, i) => i % 256);
      const b = Uint8Array.from({ length: 5 }, () => 13);
      const one = await sdk.images.edit({ model: 'oa-edit', prompt: 'x', image: await toFile(a, 'a.png', { type: 'image/png' }) });
      expect(Buffer.from(one.data![0]!.b64_json!, 'base64')).toEqual(Buffer.from(a));
      const two = await sdk.images.edit({ model: 'oa-edit', prompt: 'x', image: [await toFile(a, 'a.png'), await toFile(b, 'b.png')] });
      expect(Buffer.from(two.data![0]!.b64_json!, 'base64')).toEqual(Buffer.concat([a, b]));
    });

    it('videos: create at once, retrieve (long-poll) until completed, download with Range, list, delete; speech answers its bytes', async () => {
      const { userId, key, sdk } = await fx.user(100);
      const created = await sdk.videos.create({ model: 'oa-video', prompt: 'w', seconds: '4' as never });
      expect(created).toMatchObject({ object: 'video', model: 'oa-video', seconds: '4', size: '160x120' });
      let video = created;
      while (video.status !== 'completed' && video.status !== 'failed') video = await sdk.videos.retrieve(created.id, { headers: { Prefer: 'wait=5' } });
      expect(video.status).toBe('completed');
      expect(Buffer.from(await (await sdk.videos.downloadContent(created.id)).arrayBuffer())).toEqual(Buffer.from(VIDEO));
      const part = await call(`${fx.server.baseUrl.replace(/\/+$/, '')}/openai/v1/videos/${created.id}/content`, { headers: { authorization: `Bearer ${key}`, range: 'bytes=10-19' } });
      expect(part.status).toBe(206);
      expect(part.bytes).toEqual(Buffer.from(VIDEO.subarray(10, 20)));
      expect((await sdk.videos.list()).data.map((v) => v.id)).toEqual([created.id]);
      expect(await sdk.videos.delete(created.id)).toMatchObject({ id: created.id, deleted: true });
      expect((await sdk.videos.list()).data).toEqual([]);
      const speech = await sdk.audio.speech.create({ model: 'oa-audio', input: 'hi', voice: 'pluck' as never });
      expect(Buffer.from(await speech.arrayBuffer())).toEqual(Buffer.from(AUDIO));
      expect(await fx.ledger.balance(userId)).toBe(100 - 10 - 2);
    });

    it('errors in OpenAI shape: 400 naming the parameter, 401, 402, 404 for a missing model and for another user\u2019s video; one charge per Idempotency-Key', async () => {
      const { userId, sdk } = await fx.user(100);
      const other = await fx.user(100);
      const poor = await fx.user(0);
      await expect(sdk.images.generate({ model: 'oa-image', prompt: 'a', size: '1024x1024' })).rejects.toMatchObject({ status: 400, param: 'size', type: 'invalid_request_error' });
      await expect(sdk.images.generate({ model: 'nope', prompt: 'a' })).rejects.toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
      await expect(poor.sdk.videos.create({ model: 'oa-video', prompt: 'w' })).rejects.toMatchObject({ status: 402, code: 'insufficient_quota' });
      const { default: OpenAIClient } = await import('openai');
      const stranger = new OpenAIClient({ apiKey: 'not-a-key-at-all', baseURL: `${fx.server.baseUrl.replace(/\/+$/, '')}/openai/v1`, maxRetries: 0 });
      await expect(stranger.models.list()).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' });
      const mine = await sdk.videos.create({ model: 'oa-video', prompt: 'mine' });
      await expect(other.sdk.videos.retrieve(mine.id)).rejects.toMatchObject({ status: 404 });
      await expect(other.sdk.videos.delete(mine.id)).rejects.toMatchObject({ status: 404 });
      const headers = { 'Idempotency-Key': `oa-${randomBytes(4).toString('hex')}` };
      const first = await sdk.images.generate({ model: 'oa-image', prompt: 'once' }, { headers });
      const again = await sdk.images.generate({ model: 'oa-image', prompt: 'once' }, { headers });
      expect(again.data).toEqual(first.data);
      expect(await fx.ledger.balance(userId)).toBe(100 - 10 - 4);
    });
  });

  describe('the OpenAI-compatible surface, off', () => {
    it('answers 404 under /openai/v1, as paths that are no route', async () => {
      const off = await openAiFixture(mount, mode, false);
      try {
        const { key } = await off.user(10);
        const r = await call(`${off.server.baseUrl.replace(/\/+$/, '')}/openai/v1/models`, { headers: { authorization: `Bearer ${key}` } });
        expect(r.status).toBe(404);
      } finally {
        await off.server.close();
        await off.service.stop({ timeoutMs: 2000 });
      }
    });
  });
}
