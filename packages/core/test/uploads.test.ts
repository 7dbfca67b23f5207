import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryBlobStore, MemoryLedger, MemoryUploadStore, UnavailableError, type GenerationService, type HttpResponse, type ModelDefinition } from '@genservice/core';
import { FakeClock, until } from '@genservice/testing';
import { FileUrlSigner, fileReferenceRefusal } from '../src/domain/file-urls.js';
import { stopOn } from './support/fake-time.js';

const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3, 4]);
const services: GenerationService[] = [];
const clocks = new Map<GenerationService, FakeClock>();
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => (clocks.has(s) ? stopOn(clocks.get(s)!, s) : s.stop({ timeoutMs: 100 }))));
  clocks.clear();
});

/** What the model read through `ctx.files.fetch`, per run. */
const seen: Array<{ bytes: Uint8Array; contentType?: string }> = [];

/** A model with an image input: it answers the bytes of its first input, read the way every model should. */
const remixer: ModelDefinition = {
  modelId: 'remixer',
  title: 'Remixer',
  resultType: 'image',
  estimatedGenerationTime: 0.01,
  settings: [{ name: 'images', title: 'Images', fieldType: 'image', required: true }],
  price: 1,
};

function make(extra: Record<string, unknown> = {}) {
  const blobs = new MemoryBlobStore();
  const clock = new FakeClock();
  const service = createGenerationService({
    providers: [
      {
        models: [remixer],
        generate: async (input, ctx) => {
          const media = await ctx.files.fetch((input.settings.images as string[])[0]!);
          seen.push(media);
          return { bytes: media.bytes, mimeType: 'image/png' };
        },
      },
    ],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'ka', userId: 'alice' }, { apiKey: 'kb', userId: 'bob' }] }),
    ledger: new MemoryLedger({ balances: { alice: 10, bob: 10 } }),
    blobs,
    clock,
    publicUrl: 'https://api.example.com/gen',
    ...extra,
  });
  services.push(service);
  clocks.set(service, clock);
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
});

const create = (service: GenerationService, settings: Record<string, unknown>, key = 'ka', path = '/v1/generations', body?: unknown) =>
  service.handle({
    method: 'POST',
    path,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body ?? { modelId: 'remixer', settings }),
  });

const getGeneration = (service: GenerationService, id: string, key = 'ka') =>
  service.handle({ method: 'GET', path: `/v1/generations/${id}`, headers: { authorization: `Bearer ${key}` } });

/** A multipart/form-data body of these parts (a file part when it has a filename). */
function form(parts: Array<{ name: string; filename?: string; type?: string; bytes: Uint8Array | string }>): { body: Uint8Array; type: string } {
  const boundary = 'b0undary-x';
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.type ? `Content-Type: ${p.type}\r\n` : ''}\r\n`));
    chunks.push(Buffer.from(p.bytes));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: new Uint8Array(Buffer.concat(chunks)), type: `multipart/form-data; boundary=${boundary}` };
}

describe('POST /v1/uploads with a multipart/form-data body', () => {
  it("takes the one file part with its part's Content-Type, under the same limits", async () => {
    const { service, blobs } = make({ uploads: { maxBytes: 8, types: ['image/png'] } });
    const one = form([{ name: 'purpose', bytes: 'input' }, { name: 'file', filename: 'cat.png', type: 'image/png', bytes: PNG }]);
    const res = await upload(service, one.body, one.type);
    expect(res.status).toBe(201);
    expect(await blobs.get(json(res).id)).toEqual({ bytes: PNG, mimeType: 'image/png' });
    const jpeg = form([{ name: 'file', filename: 'cat.jpg', type: 'image/jpeg', bytes: PNG }]);
    expect(json(await upload(service, jpeg.body, jpeg.type)).error.code).toBe('unsupported_media_type');
    const untyped = form([{ name: 'file', filename: 'cat.png', bytes: PNG }]);
    expect((await upload(service, untyped.body, untyped.type)).status).toBe(415);
    const big = form([{ name: 'file', filename: 'big.png', type: 'image/png', bytes: new Uint8Array(9) }]);
    expect((await upload(service, big.body, big.type)).status).toBe(413);
  });

  it('answers a clear 400 for no file, several files, a broken form and a form without its boundary', async () => {
    const { service } = make();
    const none = form([{ name: 'file', bytes: 'not a file: no filename' }]);
    const res = await upload(service, none.body, none.type);
    expect(res.status).toBe(400);
    expect(json(res).error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/no file part/), details: [{ field: 'file', code: 'required' }] });
    const two = form([
      { name: 'file', filename: 'a.png', type: 'image/png', bytes: PNG },
      { name: 'file', filename: 'b.png', type: 'image/png', bytes: PNG },
    ]);
    const several = await upload(service, two.body, two.type);
    expect(several.status).toBe(400);
    expect(json(several).error.message).toBe('The multipart body holds 2 files; an upload is one file.');
    const broken = await upload(service, new TextEncoder().encode('--b0undary-x\r\nno end'), 'multipart/form-data; boundary=b0undary-x');
    expect(json(broken).error.message).toMatch(/^The multipart body is not valid: /);
    expect(json(await upload(service, two.body, 'multipart/form-data')).error.message).toMatch(/boundary/);
  });
});

describe('an upload as a media input', () => {
  it("runs with the owner's upload: the model reads its bytes through ctx.files.fetch (no HTTP), and its result is the owner's next input", async () => {
    const { service, clock } = make();
    await service.start();
    const { url } = json(await upload(service, PNG, 'image/png')) as { url: string };
    const created = await create(service, { images: [url] });
    expect(created.status).toBe(201);
    const { generationId } = json(created) as { generationId: string };
    const done = await until(
      async () => {
        await clock.advance(10);
        const g = json(await getGeneration(service, generationId));
        if (g.status === 'failed') throw new Error(JSON.stringify(json(await service.handle({ method: 'GET', path: `/v1/generations/${generationId}?include=details`, headers: { authorization: 'Bearer ka' } }))));
        return g.status === 'completed' ? g : undefined;
      },
      { what: 'the remix completes' },
    );
    expect(seen.at(-1)).toEqual({ bytes: PNG, contentType: 'image/png', url });
    // "Use as input": the result link is the owner's file too (tagged with its owner), and nobody else's.
    expect(done.result).toMatch(/&owner=[A-Za-z0-9_-]{43}$/);
    expect((await create(service, { images: [done.result] })).status).toBe(201);
    const bobs = await create(service, { images: [done.result] }, 'kb');
    expect(bobs.status).toBe(400);
    expect(json(bobs).error.details[0]).toMatchObject({ field: 'settings.images.0', code: 'invalid_url' });
  });

  it("refuses another user's upload, a forged or stripped owner tag, a forged signature and an expired link with a 400 naming the input; nothing is charged", async () => {
    const { service, clock } = make({ uploads: { ttlSeconds: 60 } });
    const alices = json(await upload(service, PNG, 'image/png')) as { id: string; url: string };
    const bobs = json(await upload(service, PNG, 'image/png', 'kb')) as { id: string; url: string };
    const refused = async (url: string, why: RegExp) => {
      const res = await create(service, { images: ['https://example.com/ok.png', url] });
      expect(res.status).toBe(400);
      const { error } = json(res);
      expect(error.code).toBe('invalid_settings');
      expect(error.details).toEqual([{ field: 'settings.images.1', code: 'invalid_url', message: expect.stringMatching(why) }]);
    };
    await refused(bobs.url, /not one of your files/);
    // Bob's file under Alice's tag (she cannot make Bob's tag, and his tag is not hers), or no tag at all.
    const alicesTag = new URL(alices.url).searchParams.get('owner')!;
    await refused(bobs.url.replace(/owner=[^&]+/, `owner=${alicesTag}`), /not one of your files/);
    await refused(bobs.url.replace(/&owner=[^&]+/, ''), /not one of your files/);
    // Bob's upload id in a link of Alice's (her expiry, signature and tag): the signature is over the key.
    await refused(alices.url.replace(alices.id, bobs.id), /signature does not match/);
    await refused(alices.url.replace(/sig=[^&]{4}/, 'sig=AAAA'), /signature does not match/);
    await refused(alices.url.replace(/exp=\d+/, 'exp=99999999999'), /signature does not match/);
    // The same refusals for a quote and for a batch (named by its request).
    const quote = await create(service, {}, 'ka', '/v1/quotes', { modelId: 'remixer', settings: { images: [bobs.url] } });
    expect(quote.status).toBe(400);
    const batch = await create(service, {}, 'ka', '/v1/batches', { requests: [{ modelId: 'remixer', settings: { images: [bobs.url] } }] });
    expect(batch.status).toBe(400);
    expect(json(batch).error.details[0].field).toBe('requests[0].settings.images.0');
    // Alice's own still works until it expires, then is named as expired.
    expect((await create(service, { images: [alices.url] })).status).toBe(201);
    await clock.advance(61_000);
    await refused(alices.url, /expired at .* \(upload the file again\)/);
    const balance = await service.handle({ method: 'GET', path: '/v1/balance', headers: { authorization: 'Bearer kb' } });
    expect(json(balance).balance).toBe(10);
  });

  it('leaves a link of another service (same shape, not signed by this one) to the outbound guard, and refuses a forged one under its own base', () => {
    const signer = new FileUrlSigner('a-secret-of-the-service-0123456789', 3600);
    const other = new FileUrlSigner('another-service-secret-0123456789', 3600);
    const now = 1_800_000_000_000;
    const theirs = `https://elsewhere.example${other.sign('k1', now, undefined, 'alice')}`;
    expect(fileReferenceRefusal(theirs, 'alice', signer, now, 'https://api.example.com/gen')).toBeUndefined();
    expect(fileReferenceRefusal(theirs.replace('https://elsewhere.example', 'https://api.example.com/gen'), 'alice', signer, now, 'https://api.example.com/gen/')).toMatch(/signature/);
    // Signed by this service: recognised whatever host it names (the service answers on several names).
    const ours = `http://127.0.0.1:9/x${signer.sign('k1', now, undefined, 'alice')}`;
    expect(fileReferenceRefusal(ours, 'alice', signer, now)).toBeUndefined();
    expect(fileReferenceRefusal(ours, 'bob', signer, now)).toMatch(/not one of your files/);
    expect(fileReferenceRefusal('https://example.com/cat.png', 'bob', signer, now)).toBeUndefined();
  });
});

describe('expired uploads', () => {
  it('are deleted from the blob store by the clean-up after their links expire (the clock moved, no waiting), and not before', async () => {
    const uploadStore = new MemoryUploadStore();
    const { service, blobs, clock } = make({ uploads: { ttlSeconds: 120 }, uploadStore, retention: { sweepIntervalMs: 60_000 } });
    await service.start();
    const first = json(await upload(service, PNG, 'image/png')) as { id: string; expiresAt: string };
    expect(Date.parse(first.expiresAt)).toBe(clock.now() + 120_000);
    // The sweeps after 60 s and 120 s: nothing has expired yet (the first expires at 120 s).
    await clock.advance(90_000);
    const second = json(await upload(service, PNG, 'image/png', 'kb')) as { id: string; expiresAt: string };
    await clock.advance(30_000);
    expect(await blobs.get(first.id)).not.toBeNull();
    // The sweep at 180 s.
    await clock.advance(60_000);
    await until(async () => (await blobs.get(first.id)) === null, { what: 'the first upload deleted by the sweep after its expiry' });
    expect(await blobs.get(second.id)).not.toBeNull();
    expect((await uploadStore.listExpiredBefore(Number.MAX_SAFE_INTEGER, 10)).map((u) => u.key)).toEqual([second.id]);
    await clock.advance(60_000);
    await until(async () => (await blobs.get(second.id)) === null, { what: 'the second upload deleted' });
    expect(await uploadStore.listExpiredBefore(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
  });

  it('leaves the record when the blob store cannot delete, and the next clean-up finishes the job; an upload the store cannot record is not kept', async () => {
    const uploadStore = new MemoryUploadStore();
    const { service, blobs, clock } = make({ uploads: { ttlSeconds: 60 }, uploadStore, retention: { sweepIntervalMs: 60_000 } });
    await service.start();
    const { id } = json(await upload(service, PNG, 'image/png')) as { id: string };
    const deleteMany = blobs.deleteMany.bind(blobs);
    let down = true;
    blobs.deleteMany = (keys) => (down ? Promise.reject(new UnavailableError('blob store down')) : deleteMany(keys));
    await clock.advance(61_000);
    await until(async () => (await uploadStore.listExpiredBefore(clock.now(), 10)).length === 1 && down, { what: 'a failed clean-up keeps the record' });
    expect(await blobs.get(id)).not.toBeNull();
    down = false;
    await clock.advance(60_000);
    await until(async () => (await blobs.get(id)) === null, { what: 'the next clean-up deletes it' });
    const insert = uploadStore.insert.bind(uploadStore);
    uploadStore.insert = () => Promise.reject(new UnavailableError('upload store down'));
    let kept = 0;
    const put = blobs.put.bind(blobs);
    const deleted: string[] = [];
    blobs.put = async (bytes, mimeType) => {
      kept++;
      return put(bytes, mimeType);
    };
    const del = blobs.delete.bind(blobs);
    blobs.delete = async (key) => {
      deleted.push(key);
      return del(key);
    };
    expect((await upload(service, PNG, 'image/png')).status).toBe(503);
    expect(kept).toBe(1);
    expect(deleted).toHaveLength(1);
    expect(await blobs.get(deleted[0]!)).toBeNull();
    uploadStore.insert = insert;
  });
});
