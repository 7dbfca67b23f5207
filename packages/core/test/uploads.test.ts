import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryBlobStore, MemoryLedger, type GenerationService, type HttpResponse } from '@genservice/core';
import { FakeClock } from '@genservice/testing';
import { FileUrlSigner } from '../src/domain/file-urls.js';
import { resolveOptions } from '../src/options-schema.js';
import { Uploads } from '../src/use-cases/uploads.js';
import { Views } from '../src/use-cases/views.js';

const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4]);
const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

function make(extra: Record<string, unknown> = {}) {
  const blobs = new MemoryBlobStore();
  const clock = new FakeClock();
  const service = createGenerationService({
    providers: [{ models: [], generate: async () => ({ text: '' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 10, bob: 10 } }),
    blobs,
    clock,
    publicUrl: 'https://api.example.com/gen',
    ...extra,
  });
  services.push(service);
  return { service, blobs, clock };
}

const upload = (service: GenerationService, body: Uint8Array | string, type: string | undefined, key = 'ka') =>
  service.handle({ method: 'POST', path: '/v1/uploads', headers: { authorization: `Bearer ${key}`, ...(type ? { 'content-type': type } : {}) }, body });

const json = (res: HttpResponse) => JSON.parse(String(res.body));

async function bytesOf(body: HttpResponse['body']): Promise<Uint8Array> {
  if (typeof body === 'string') return new TextEncoder().encode(body);
  if (body instanceof Uint8Array) return body;
  const parts: number[] = [];
  for await (const chunk of body) parts.push(...(typeof chunk === 'string' ? new TextEncoder().encode(chunk) : chunk));
  return Uint8Array.from(parts);
}

describe('POST /v1/uploads', () => {
  it("keeps the raw body in the blob store and answers { id, url, expiresAt }: the service's own signed URL of it", async () => {
    const { service, blobs, clock } = make({ uploads: { ttlSeconds: 600 } });
    const res = await upload(service, PNG, 'image/png');
    expect(res.status).toBe(201);
    const { id, url, expiresAt } = json(res) as { id: string; url: string; expiresAt: string };
    expect(await blobs.get(id)).toEqual({ bytes: PNG, mimeType: 'image/png' });
    expect(url.startsWith(`https://api.example.com/gen/v1/files/${id}?exp=`)).toBe(true);
    // The URL works for ttlSeconds from now.
    expect(expiresAt).toBe(new Date(clock.now() + 600_000).toISOString());
    const file = await service.handle({ method: 'GET', path: url.slice('https://api.example.com/gen'.length), headers: {} });
    expect(file.status).toBe(200);
    expect(file.headers['content-type']).toBe('image/png');
    expect(await bytesOf(file.body)).toEqual(PNG);
  });

  it('refuses a type outside uploads.types (415), a body over uploads.maxBytes (413), an empty one (400), and needs a key (401)', async () => {
    const { service, blobs } = make({ uploads: { maxBytes: 8, types: ['image/png'] } });
    let puts = 0;
    const put = blobs.put.bind(blobs);
    blobs.put = (bytes, mimeType) => {
      puts++;
      return put(bytes, mimeType);
    };
    expect(json(await upload(service, PNG, 'image/jpeg')).error.code).toBe('unsupported_media_type');
    expect((await upload(service, PNG, undefined)).status).toBe(415);
    const big = await upload(service, new Uint8Array(9), 'image/png');
    expect(big.status).toBe(413);
    expect(json(big).error.message).toBe('An upload is at most 8 bytes.');
    expect((await upload(service, new Uint8Array(0), 'image/png')).status).toBe(400);
    expect((await upload(service, PNG, 'image/png', 'nope')).status).toBe(401);
    expect(puts).toBe(0);
    // A parameter of the type is not part of it; the limit is inclusive.
    expect((await upload(service, PNG, 'image/png; name=x')).status).toBe(201);
  });

  it("tells the caller's own upload URLs from anybody else's, a result link, a forged one and an expired one", async () => {
    const clock = new FakeClock();
    const options = resolveOptions({ providers: [], clock, publicUrl: 'https://api.example.com/gen', uploads: { ttlSeconds: 60 } });
    const signer = new FileUrlSigner('a-secret-of-the-service-0123456789', 3600);
    const uploads = new Uploads(options, new MemoryBlobStore(), signer, new Views(options, signer));
    const { url, id } = await uploads.create('alice', PNG, 'image/png');
    expect(uploads.isOwnUpload(url, 'alice')).toBe(true);
    expect(uploads.isOwnUpload(url, 'bob')).toBe(false);
    // Another user's tag on the same file, a link without a tag (a result's), a forged signature, another host.
    const bobs = url.replace(/owner=[^&]+/, `owner=${signer.ownerTag(id, 'bob')}`);
    expect(uploads.isOwnUpload(bobs, 'alice')).toBe(false);
    expect(uploads.isOwnUpload(bobs, 'bob')).toBe(true);
    expect(uploads.isOwnUpload(url.replace(/&owner=[^&]+/, ''), 'alice')).toBe(false);
    expect(uploads.isOwnUpload(url.replace(/sig=[^&]{4}/, 'sig=AAAA'), 'alice')).toBe(false);
    expect(uploads.isOwnUpload(url.replace('https://api.example.com/gen', 'https://evil.example'), 'alice')).toBe(false);
    expect(uploads.isOwnUpload('not a url', 'alice')).toBe(false);
    await clock.advance(60_000);
    expect(uploads.isOwnUpload(url, 'alice')).toBe(true);
    await clock.advance(1000);
    expect(uploads.isOwnUpload(url, 'alice')).toBe(false);
  });
});
