import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAI } from '@ai-sdk/openai';
import { generateImage } from 'ai';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, MemoryUploadStore, type GenerationService } from '@genservice/core';
import { bodyLimitsOf, handleNodeRequest, isApiPath, writeNodeResponse } from '@genservice/core/adapter';
import { createDemoProvider, encodePng } from '@genservice/demo-models';

/**
 * Issue 39, "Done when": the official `openai` SDK (v6) and `@ai-sdk/openai` as clients of the OpenAI-compatible
 * surface, against a real server on loopback serving the demo models, with a real loopback webhook receiver.
 */

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47];

interface Delivery {
  headers: Record<string, string>;
  body: string;
}

async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function close(server: Server | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (!server) return resolve();
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

describe('the OpenAI-compatible surface with the official SDKs (issue 39)', () => {
  let service: GenerationService;
  let api: Server;
  let receiver: Server;
  let base: string;
  let origin: string;
  const keys = new MemoryApiKeyStore();
  const ledger = new MemoryLedger();
  const uploadStore = new MemoryUploadStore();
  const deliveries: Delivery[] = [];
  let deliveryArrived: (() => void) | undefined;

  const client = (apiKey: string): OpenAI => new OpenAI({ apiKey, baseURL: `${base}/openai/v1`, maxRetries: 0 });
  let users = 0;
  async function user(balance: number): Promise<{ userId: string; key: string; sdk: OpenAI }> {
    const userId = `u${++users}`;
    const key = `key-${userId}-0123456789abcdef`;
    await keys.addKey(key, userId);
    if (balance > 0) await ledger.credit(userId, balance);
    return { userId, key, sdk: client(key) };
  }

  beforeAll(async () => {
    const hook = await listen((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        deliveries.push({ headers: req.headers as Record<string, string>, body });
        deliveryArrived?.();
        res.writeHead(204).end();
      });
    });
    receiver = hook.server;
    service = createGenerationService({
      uploadStore,
      // Private addresses stay refused: the uploads are the service's own files, read from its blob store.
      providers: [createDemoProvider({ speed: 0.02, imageWorkers: 0 })],
      apiKeys: keys,
      ledger,
      trustRequestHost: true,
      openai: { enabled: true, maxWaitSeconds: 30 },
      webhooks: { allowHttp: true, allowPrivateUrls: true, endpoints: () => [{ url: `${hook.url}/hooks`, events: ['video.completed', 'video.failed'] }] },
      runner: { retryBaseDelayMs: 1 },
    });
    await service.start();
    const limits = bodyLimitsOf(service);
    const served = await listen((req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      if (!isApiPath(path, service)) return void res.writeHead(404).end();
      handleNodeRequest(service, req, { limits, origin: () => origin, remoteAddress: req.socket.remoteAddress }).then((out) => writeNodeResponse(res, out));
    });
    api = served.server;
    base = served.url;
    origin = served.url;
  });

  afterAll(async () => {
    await close(api);
    await service?.stop();
    await close(receiver);
  });

  it('models.list and models.retrieve answer the models the key may use', async () => {
    const { userId, sdk } = await user(10);
    const ids = [];
    for await (const m of sdk.models.list()) ids.push(m.id);
    expect(ids).toEqual(expect.arrayContaining(['demo-image', 'demo-video', 'demo-audio', 'demo-image-remix']));
    expect(await sdk.models.retrieve('demo-video')).toMatchObject({ id: 'demo-video', object: 'model' });
    const limited = await service.accounts.createKey(userId, { name: 'images only', models: ['demo-image'] });
    const only = [];
    for await (const m of client(limited.apiKey).models.list()) only.push(m.id);
    expect(only).toEqual(['demo-image']);
    await expect(client(limited.apiKey).models.retrieve('demo-video')).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('images.generate answers b64_json, a signed url, and charges the image once', async () => {
    const { userId, sdk } = await user(100);
    const b64 = await sdk.images.generate({ model: 'demo-image', prompt: 'a red boat', size: '256x256', response_format: 'b64_json' });
    const bytes = Buffer.from(b64.data![0]!.b64_json!, 'base64');
    expect([...bytes.subarray(0, 4)]).toEqual(PNG_SIGNATURE);
    expect(b64.usage?.total_tokens).toBe(5);
    expect(b64.output_format).toBe('png');
    const url = await sdk.images.generate({ model: 'demo-image', prompt: 'a red boat', size: '512x512', response_format: 'url' });
    const link = url.data![0]!.url!;
    expect(link.startsWith(`${base}/v1/files/`)).toBe(true);
    const file = Buffer.from(await (await fetch(link)).arrayBuffer());
    expect([...file.subarray(0, 4)]).toEqual(PNG_SIGNATURE);
    expect(await ledger.balance(userId)).toBe(100 - 5 - 8);
    // Both are generations of the native API too.
    const listed = await service.list(userId, { baseUrl: base });
    expect(listed.data.map((g) => g.modelId)).toEqual(['demo-image', 'demo-image']);
  });

  it('images.generate with stream and partial_images streams the preview, then the image', async () => {
    const { sdk } = await user(100);
    const stream = await sdk.images.generate({ model: 'demo-image', prompt: 'a green hill', size: '256x256', stream: true, partial_images: 2 });
    const events = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.type)).toEqual(['image_generation.partial_image', 'image_generation.completed']);
    const [partial, completed] = events as [OpenAI.ImageGenPartialImageEvent, OpenAI.ImageGenCompletedEvent];
    expect(partial.partial_image_index).toBe(0);
    expect([...Buffer.from(partial.b64_json, 'base64').subarray(0, 4)]).toEqual(PNG_SIGNATURE);
    expect(Buffer.from(completed.b64_json, 'base64').length).toBeGreaterThan(Buffer.from(partial.b64_json, 'base64').length);
    expect(completed.usage.total_tokens).toBe(5);
  });

  it('images.edit uploads the images (multipart) and the model reads them through signed file URLs', async () => {
    const { sdk, userId } = await user(100);
    const png = encodePng({ width: 8, height: 8, data: new Uint8Array(8 * 8 * 4).fill(200) });
    const one = await sdk.images.edit({ model: 'demo-image-remix', prompt: 'tint it', image: await toFile(png, 'in.png', { type: 'image/png' }) });
    expect([...Buffer.from(one.data![0]!.b64_json!, 'base64').subarray(0, 4)]).toEqual(PNG_SIGNATURE);
    // Recorded like any upload, so the clean-up deletes it once its link expired.
    const recorded = await uploadStore.listExpiredBefore(Number.MAX_SAFE_INTEGER, 1000);
    expect(recorded.filter((u) => u.ownerId === userId)).toEqual([expect.objectContaining({ mimeType: 'image/png', size: png.byteLength })]);
    const two = await sdk.images.edit({
      model: 'demo-image-remix',
      prompt: 'blend them',
      image: [await toFile(png, 'a.png', { type: 'image/png' }), await toFile(png, 'b.png', { type: 'image/png' })],
      size: '256x256',
    });
    expect(two.data).toHaveLength(1);
    await expect(sdk.images.edit({ model: 'demo-image-remix', prompt: 'x', image: await toFile(png, 'a.png'), mask: await toFile(png, 'm.png') })).rejects.toMatchObject({
      status: 400,
      param: 'mask',
    });
  });

  it('videos: create, retrieve until completed, downloadContent (with Range), list, delete; a video.completed webhook unwraps', async () => {
    const { userId, key, sdk } = await user(100);
    const arrived = new Promise<void>((resolve) => (deliveryArrived = resolve));
    const created = await sdk.videos.create({ model: 'demo-video', prompt: 'waves', seconds: '4' as never, size: '160x120' as never });
    expect(created).toMatchObject({ object: 'video', model: 'demo-video', seconds: '4', size: '160x120', error: null });
    // Answered at once: the runner may have claimed it already.
    expect(['queued', 'in_progress']).toContain(created.status);
    let video = created;
    while (video.status !== 'completed' && video.status !== 'failed') {
      video = await sdk.videos.retrieve(created.id, { headers: { Prefer: 'wait=5' } });
    }
    expect(video).toMatchObject({ status: 'completed', progress: 100 });
    expect(typeof video.completed_at).toBe('number');
    const content = await sdk.videos.downloadContent(created.id);
    const mp4 = Buffer.from(await content.arrayBuffer());
    expect(mp4.subarray(4, 8).toString('latin1')).toBe('ftyp');
    const range = await fetch(`${base}/openai/v1/videos/${created.id}/content?variant=video`, { headers: { authorization: `Bearer ${key}`, range: 'bytes=0-7' } });
    expect(range.status).toBe(206);
    expect(Buffer.from(await range.arrayBuffer())).toEqual(mp4.subarray(0, 8));
    await expect(sdk.videos.downloadContent(created.id, { variant: 'thumbnail' })).rejects.toMatchObject({ status: 404 });

    const page = await sdk.videos.list({ limit: 10 });
    expect(page.data.map((v) => v.id)).toEqual([created.id]);
    expect((await service.details(userId, created.id.slice('video_'.length), { baseUrl: base })).status).toBe('completed');

    await arrived;
    const delivery = deliveries.find((d) => d.body.includes(created.id))!;
    const secret = (await (await fetch(`${base}/v1/webhooks/secret`, { headers: { authorization: `Bearer ${key}` } })).json()) as { key: string };
    const event = await sdk.webhooks.unwrap(delivery.body, delivery.headers, secret.key);
    expect(event).toMatchObject({ object: 'event', type: 'video.completed', data: { id: created.id } });
    await expect(sdk.webhooks.unwrap(delivery.body.replace('video.completed', 'video.failed'), delivery.headers, secret.key)).rejects.toThrow();

    expect(await sdk.videos.delete(created.id)).toEqual({ id: created.id, object: 'video.deleted', deleted: true });
    await expect(sdk.videos.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    expect(await ledger.balance(userId)).toBe(100 - 30);
  });

  it('audio.speech.create answers the audio bytes (input -> prompt, voice -> instrument)', async () => {
    const { userId, sdk } = await user(100);
    const speech = await sdk.audio.speech.create({ model: 'demo-audio', input: 'a calm tune', voice: 'pluck' as never });
    expect(speech.headers.get('content-type')).toBe('audio/wav');
    const wav = Buffer.from(await speech.arrayBuffer());
    expect(wav.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(await ledger.balance(userId)).toBe(96);
    const [g] = (await service.list(userId, { baseUrl: base })).data;
    expect(g).toMatchObject({ modelId: 'demo-audio', status: 'completed' });
  });

  it('errors come in OpenAI shape with the native statuses', async () => {
    const { sdk } = await user(100);
    const poor = await user(0);
    const other = await user(100);
    const unknown = await sdk.images.generate({ model: 'no-such-model', prompt: 'x' }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found', param: 'model', type: 'invalid_request_error' });
    const size = await sdk.images.generate({ model: 'demo-image', prompt: 'x', size: '1024x1024' }).catch((e: unknown) => e);
    expect(size).toBeInstanceOf(OpenAI.BadRequestError);
    expect(size).toMatchObject({ status: 400, param: 'size', type: 'invalid_request_error' });
    const seconds = await sdk.videos.create({ model: 'demo-video', prompt: 'x', seconds: '12' }).catch((e: unknown) => e);
    expect(seconds).toMatchObject({ status: 400, param: 'seconds' });
    const wrongKey = await client('not-a-key-0123456789').models.list().catch((e: unknown) => e);
    expect(wrongKey).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(wrongKey).toMatchObject({ status: 401, code: 'invalid_api_key' });
    const broke = await poor.sdk.images.generate({ model: 'demo-image', prompt: 'x' }).catch((e: unknown) => e);
    expect(broke).toMatchObject({ status: 402, code: 'insufficient_quota', type: 'insufficient_quota' });
    const video = await sdk.videos.create({ model: 'demo-video', prompt: 'mine' });
    // Each one awaited before the next starts: a rejection is never left without its handler meanwhile.
    for (const attempt of [() => other.sdk.videos.retrieve(video.id), () => other.sdk.videos.delete(video.id), () => other.sdk.videos.downloadContent(video.id)]) {
      await expect(attempt()).rejects.toMatchObject({ status: 404 });
    }
    const raw = await fetch(`${base}/openai/v1/nope`, { headers: { authorization: `Bearer ${other.key}` } });
    expect(raw.status).toBe(404);
    expect(Object.keys(((await raw.json()) as { error: object }).error).sort()).toEqual(['code', 'message', 'param', 'type']);
  });

  it('one charge per Idempotency-Key', async () => {
    const { userId, sdk } = await user(100);
    const headers = { 'Idempotency-Key': 'same-image-1' };
    const a = await sdk.images.generate({ model: 'demo-image', prompt: 'once', size: '256x256' }, { headers });
    const b = await sdk.images.generate({ model: 'demo-image', prompt: 'once', size: '256x256' }, { headers });
    expect(b.data![0]!.b64_json).toBe(a.data![0]!.b64_json);
    expect(await ledger.balance(userId)).toBe(95);
    const png = encodePng({ width: 4, height: 4, data: new Uint8Array(64).fill(90) });
    const edit = async () => sdk.images.edit({ model: 'demo-image-remix', prompt: 'same', image: await toFile(png, 'a.png', { type: 'image/png' }) }, { headers: { 'Idempotency-Key': 'same-edit-1' } });
    await edit();
    await edit();
    expect(await ledger.balance(userId)).toBe(95 - 6);
    const mismatch = await sdk.images.generate({ model: 'demo-image', prompt: 'another', size: '256x256' }, { headers }).catch((e: unknown) => e);
    expect(mismatch).toMatchObject({ status: 422, code: 'idempotency_mismatch' });
    expect((await service.list(userId, { baseUrl: base })).data).toHaveLength(2);
  });

  it('@ai-sdk/openai with baseURL pointed at the host runs generateImage', async () => {
    const { userId, key } = await user(100);
    const provider = createOpenAI({ apiKey: key, baseURL: `${base}/openai/v1` });
    const { image } = await generateImage({ model: provider.image('demo-image'), prompt: 'a lighthouse', size: '256x256' as `${number}x${number}`, maxRetries: 0 });
    expect([...image.uint8Array.subarray(0, 4)]).toEqual(PNG_SIGNATURE);
    expect(image.mediaType).toBe('image/png');
    expect(await ledger.balance(userId)).toBe(95);
  });
});
