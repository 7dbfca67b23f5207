import { createServer } from 'node:net';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { S3BlobStore, type S3BlobStoreOptions } from '@genservice/blob-s3';
import {
  createGenerationService,
  type GenerationService,
  type HttpResponse,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
} from '@genservice/core';
import { createScriptedProvider, FakeClock, fakeModel, fileScript, until } from '@genservice/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type LocalS3, S3RVER_CREDENTIALS, startS3 } from './s3rver.js';

const IMAGE = Uint8Array.from({ length: 100 }, (_, i) => (i * 7) & 0xff);
let s3: LocalS3;
let buckets = 0;
const services: GenerationService[] = [];

beforeAll(async () => {
  s3 = await startS3();
});
afterAll(async () => {
  await s3.close();
});
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

async function newBucket(): Promise<string> {
  const bucket = `svc-${++buckets}`;
  await s3.createBucket(bucket);
  return bucket;
}

function serviceOn(blobs: S3BlobStore, ledger = new MemoryLedger({ balances: { alice: 100 } }), extra: { fileUrlSecret?: string; retention?: { finishedTtlMs?: number; sweepIntervalMs?: number }; clock?: FakeClock } = {}): GenerationService {
  const service = createGenerationService({
    providers: [
      createScriptedProvider({
        models: [fakeModel({ modelId: 'img', resultType: 'image', price: 5, maxAttempts: 2 })],
        script: fileScript(IMAGE, 'image/png'),
      }),
    ],
    ledger,
    store: new MemoryGenerationStore(),
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }] }),
    blobs,
    publicUrl: 'http://files.test/api',
    runner: { retryBaseDelayMs: 1, retryMaxDelayMs: 1 },
    ...extra,
  });
  services.push(service);
  return service;
}

function settled(service: GenerationService, id: string): Promise<{ status: string; result?: string; error?: unknown; price?: number }> {
  const read = async () => (await service.details('alice', id)) as unknown as { status: string; result?: string; error?: unknown; price?: number };
  return until(read, { accept: (g) => g.status === 'completed' || g.status === 'failed', what: `${id} to finish` });
}

function get(service: GenerationService, url: string, headers: Record<string, string> = {}): Promise<HttpResponse> {
  const path = url.slice('http://files.test/api'.length);
  return service.handle({ method: 'GET', path, headers });
}

async function collect(body: HttpResponse['body']): Promise<Uint8Array> {
  if (typeof body === 'string') return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  const parts: number[] = [];
  for await (const chunk of body) parts.push(...(typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk));
  return Uint8Array.from(parts);
}

function s3Store(bucket: string, extra: Partial<S3BlobStoreOptions> = {}): S3BlobStore {
  return new S3BlobStore({ bucket, prefix: 'results/', endpoint: s3.endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS, ...extra });
}

/** An endpoint where nothing listens: every call fails to connect, as during an outage. */
async function deadEndpoint(): Promise<string> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

describe('a service whose files are in S3', () => {
  it('stores the image in the bucket; its result URL redirects to a presigned GET that answers Range from S3', async () => {
    const bucket = await newBucket();
    const service = serviceOn(s3Store(bucket, { presignedUrlTtlSeconds: 120 }));
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img' });
    const done = await settled(service, generationId);
    expect(done.status).toBe('completed');

    const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: bucket }));
    const key = decodeURIComponent(/\/v1\/files\/([^?]+)/.exec(done.result!)![1]!);
    expect(listed.Contents?.map((o) => o.Key)).toEqual([`results/${key}`]);

    const res = await get(service, done.result!);
    expect(res.status).toBe(302);
    expect(res.headers['cache-control']).toBe('private, no-store');
    const location = new URL(res.headers.location!);
    // Signature V4 on the URL itself (s3rver does not check it, so the URL is what is asserted).
    expect(location.origin).toBe(s3.endpoint);
    expect(location.pathname).toBe(`/${bucket}/results/${key}`);
    expect(location.searchParams.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(location.searchParams.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    expect(location.searchParams.get('X-Amz-Credential')).toMatch(/^S3RVER\/\d{8}\/us-east-1\/s3\/aws4_request$/);
    expect(Number(location.searchParams.get('X-Amz-Expires'))).toBe(120);
    expect(location.searchParams.get('response-content-disposition')).toBe(`inline; filename="${key}.png"`);

    const ranged = await fetch(location, { headers: { range: 'bytes=0-15' } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get('content-range')).toBe('bytes 0-15/100');
    expect(ranged.headers.get('content-type')).toBe('image/png');
    expect(ranged.headers.get('content-disposition')).toBe(`inline; filename="${key}.png"`);
    expect(Array.from(new Uint8Array(await ranged.arrayBuffer()))).toEqual(Array.from(IMAGE.subarray(0, 16)));
  });

  it('a presigned URL never outlives the service URL it answers', async () => {
    const service = serviceOn(s3Store(await newBucket(), { presignedUrlTtlSeconds: 604_800 }));
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img' });
    const done = await settled(service, generationId);
    const exp = Number(new URL(done.result!).searchParams.get('exp'));
    // The lifetime is at most what the service URL has left when the files route answers, which is no later than now:
    // a bound taken before the request holds however slowly the request runs.
    const askedAt = Math.floor(Date.now() / 1000);
    const res = await get(service, done.result!);
    const expires = Number(new URL(res.headers.location!).searchParams.get('X-Amz-Expires'));
    expect(expires).toBeLessThanOrEqual(exp - askedAt + 1);
    expect(expires).toBeLessThan(604_800);
  });

  it("serve: 'stream' streams the object from S3, with the service's own range, type and disposition", async () => {
    const service = serviceOn(s3Store(await newBucket(), { serve: 'stream' }));
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img' });
    const done = await settled(service, generationId);

    const part = await get(service, done.result!, { range: 'bytes=0-15' });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe('bytes 0-15/100');
    expect(part.headers['content-length']).toBe('16');
    expect(part.headers['content-type']).toBe('image/png');
    expect(part.headers['content-security-policy']).toBe("default-src 'none'; sandbox");
    expect(Array.from(await collect(part.body))).toEqual(Array.from(IMAGE.subarray(0, 16)));

    const whole = await get(service, done.result!);
    expect(whole.status).toBe(200);
    expect(Array.from(await collect(whole.body))).toEqual(Array.from(IMAGE));
    expect((await get(service, done.result!, { range: 'bytes=500-' })).status).toBe(416);
  });

  it('a file URL whose object is gone answers the JSON 404, not a redirect to S3', async () => {
    const blobs = s3Store(await newBucket());
    const service = serviceOn(blobs);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img' });
    const done = await settled(service, generationId);
    await blobs.delete(decodeURIComponent(/\/v1\/files\/([^?]+)/.exec(done.result!)![1]!));
    const res = await get(service, done.result!);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body as string)).toEqual({ error: { code: 'not_found', message: 'File not found.' } });
  });
});

describe('DELETE of a generation whose file is in S3', () => {
  const auth = { authorization: 'Bearer ka' };

  it('removes the object; the result URL and every read answer 404', async () => {
    const bucket = await newBucket();
    const service = serviceOn(s3Store(bucket));
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img' });
    const done = await settled(service, generationId);
    expect(await s3.keys(bucket)).toHaveLength(1);
    const res = await service.handle({ method: 'DELETE', path: `/v1/generations/${generationId}`, headers: auth });
    expect(res.status).toBe(204);
    expect(await s3.keys(bucket)).toEqual([]);
    expect((await get(service, done.result!)).status).toBe(404);
    expect((await service.handle({ method: 'GET', path: `/v1/generations/${generationId}`, headers: auth })).status).toBe(404);
  });
});

describe('expiry of a generation whose file is in S3', () => {
  it('asked for with expiresAfterSeconds: it reads as deleted once expired; the sweep removes the object, and an outage leaves it for the next sweep', async () => {
    const bucket = await newBucket();
    const blobs = s3Store(bucket);
    // The sweep's own timer stays out of the way: the test sweeps.
    // Its life ends when the test moves the clock.
    const clock = new FakeClock(Date.now());
    const service = serviceOn(blobs, undefined, { clock, retention: { finishedTtlMs: 3_600_000, sweepIntervalMs: 3_600_000 } });
    await service.start();
    const auth = { authorization: 'Bearer ka' };
    const res = await service.handle({ method: 'POST', path: '/v1/generations', headers: { ...auth, 'content-type': 'application/json' }, body: '{"modelId":"img","expiresAfterSeconds":1}' });
    expect(res.status).toBe(201);
    const { generationId } = JSON.parse(res.body as string) as { generationId: string };
    await settled(service, generationId).catch(() => undefined);
    expect(await s3.keys(bucket)).toHaveLength(1);
    // Expired: every read is the 404 of a missing generation, before any sweep.
    const read = async () => (await service.handle({ method: 'GET', path: `/v1/generations/${generationId}`, headers: auth })).status;
    await clock.advance(999);
    expect(await read()).toBe(200);
    await clock.advance(1);
    expect(await read()).toBe(404);
    // The sweep takes the generations whose life ended before its time.
    await clock.advance(1);
    const deleteMany = blobs.deleteMany.bind(blobs);
    const endpoint = await deadEndpoint();
    const dead = s3Store('any-bucket', { client: new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: S3RVER_CREDENTIALS, maxAttempts: 1 }) });
    blobs.deleteMany = (keys) => dead.deleteMany(keys);
    await expect(service.sweep()).rejects.toThrow();
    expect(await s3.keys(bucket)).toHaveLength(1);
    blobs.deleteMany = deleteMany;
    expect(await service.sweep()).toBe(1);
    expect(await s3.keys(bucket)).toEqual([]);
  });
});

describe('S3 outages', () => {
  const down = async (): Promise<S3BlobStore> =>
    s3Store('any-bucket', { client: new S3Client({ region: 'us-east-1', endpoint: await deadEndpoint(), forcePathStyle: true, credentials: S3RVER_CREDENTIALS, maxAttempts: 1 }) });

  it('an upload that cannot reach S3 is retried, then fails the generation retryably and free; polls never answer 500', async () => {
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const blobs = await down();
    let puts = 0;
    const put = blobs.put.bind(blobs);
    blobs.put = (bytes, mimeType) => {
      puts++;
      return put(bytes, mimeType);
    };
    const service = serviceOn(blobs, ledger);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img' });
    const failed = await settled(service, generationId);
    expect(failed.status).toBe('failed');
    expect(failed.error).toEqual({ code: 'storage_unavailable', message: 'The result could not be stored. Please try again.' });
    expect(failed.price).toBe(0);
    // The model's maxAttempts (2) bounds the upload's attempts too.
    expect(puts).toBe(2);
    expect((await ledger.account('alice')).balance).toBe(100);
    const poll = await service.handle({ method: 'GET', path: `/v1/generations/${generationId}`, headers: { authorization: 'Bearer ka' } });
    expect(poll.status).toBe(200);
    expect(JSON.parse(poll.body as string).status).toBe('failed');
  });

  it('a file request while S3 is down answers 503 with Retry-After', async () => {
    const fileUrlSecret = 'a-secret-both-instances-share-0123456789';
    const up = serviceOn(s3Store(await newBucket()), undefined, { fileUrlSecret });
    await up.start();
    const { generationId } = await up.create('alice', { modelId: 'img' });
    const done = await settled(up, generationId);
    // The same signed URL, answered by an instance that cannot reach S3.
    const cut = serviceOn(await down(), undefined, { fileUrlSecret });
    const res = await get(cut, done.result!);
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
    expect(JSON.parse(res.body as string).error.code).toBe('unavailable');
  });

  it('a DELETE while S3 is down answers 503 with Retry-After and leaves the generation as it was, for a retry', async () => {
    const bucket = await newBucket();
    const blobs = s3Store(bucket);
    const service = serviceOn(blobs);
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'img' });
    const done = await settled(service, generationId);
    const dead = await down();
    const deleteMany = blobs.deleteMany.bind(blobs);
    blobs.deleteMany = (keys) => dead.deleteMany(keys);
    const path = `/v1/generations/${generationId}`;
    const auth = { authorization: 'Bearer ka' };

    const refused = await service.handle({ method: 'DELETE', path, headers: auth });
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    expect(JSON.parse(refused.body as string).error.code).toBe('unavailable');
    const still = await service.handle({ method: 'GET', path, headers: auth });
    expect(JSON.parse(still.body as string)).toEqual({ status: 'completed', result: done.result, price: 5 });
    expect((await get(service, done.result!)).status).toBe(302);
    expect(await s3.keys(bucket)).toHaveLength(1);

    blobs.deleteMany = deleteMany;
    expect((await service.handle({ method: 'DELETE', path, headers: auth })).status).toBe(204);
    expect(await s3.keys(bucket)).toEqual([]);
  });
});
