import { describe, expect, it } from 'vitest';
import type { BlobStore, ServedBlob } from '@genservice/core/ports';
import { useFresh } from './harness.js';

/** Keys that are not (and cannot be) a key handed out by `put`, aimed at path-based and SQL-based stores. */
function hostileKeys(real: string): string[] {
  return [
    '',
    '.',
    '..',
    '/',
    '\\',
    '../x',
    '../../../../etc/passwd',
    '..\\..\\windows\\win.ini',
    '%2e%2e/etc/passwd',
    '%2e%2e%2fetc%2fpasswd',
    '/etc/passwd',
    'C:\\Windows\\win.ini',
    'a/b',
    'a\\b',
    '\0',
    `${real}\0`,
    `${real}/`,
    `${real}/..`,
    `../${real}`,
    `./${real}`,
    `${real.slice(0, 2)}/${real}`,
    `${real}.json`,
    `${real}.meta`,
    `${real}.tmp`,
    `${real} `,
    ` ${real}`,
    `${real}%`,
    '*',
    '?',
    "' OR '1'='1",
    '__proto__',
    'constructor',
    'x'.repeat(10_000),
    'é'.repeat(200),
  ];
}

const SERVE = { contentDisposition: (mimeType: string) => `inline; filename="result.${mimeType.replace('/', '-')}"`, expiresInSeconds: 600 };

async function putMany(blobs: BlobStore, n: number): Promise<string[]> {
  const keys: string[] = [];
  // A few at a time: a remote store must not be flooded with a thousand connections at once.
  for (let i = 0; i < n; i += 50) {
    keys.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, (_, j) => blobs.put(new Uint8Array([(i + j) & 0xff]), 'text/plain')))));
  }
  return keys;
}

/** Contract every BlobStore passes. `make()` must give an empty store; `close()` releases whatever it made. */
export function runBlobStoreContract(name: string, make: () => Promise<{ blobs: BlobStore; close(): Promise<void> }>): void {
  describe(`${name}: BlobStore contract`, () => {
    const subject = useFresh(make);
    const blobs = (): BlobStore => subject().blobs;

    it('returns what was put, with its mime type', async () => {
      const bytes = new Uint8Array(Array.from({ length: 256 }, (_, i) => i));
      const key = await blobs().put(bytes, 'image/png');
      const blob = await blobs().get(key);
      expect(blob?.mimeType).toBe('image/png');
      expect(Array.from(blob!.bytes)).toEqual(Array.from(bytes));
    });

    it('round-trips an empty file, a 3 MiB file and unusual mime types', async () => {
      const empty = await blobs().put(new Uint8Array(0), 'application/octet-stream');
      const bigBytes = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 31) & 0xff);
      const big = await blobs().put(bigBytes, 'video/mp4');
      const odd = await blobs().put(new Uint8Array([1]), 'text/plain; charset=utf-8');
      expect((await blobs().get(empty))?.bytes.byteLength).toBe(0);
      const gotBig = await blobs().get(big);
      expect(gotBig?.mimeType).toBe('video/mp4');
      expect(Buffer.from(gotBig!.bytes).equals(Buffer.from(bigBytes))).toBe(true);
      expect((await blobs().get(odd))?.mimeType).toBe('text/plain; charset=utf-8');
    });

    it('hands out distinct, URL-safe, unguessably long keys', async () => {
      const keys = await Promise.all(Array.from({ length: 50 }, (_, i) => blobs().put(new Uint8Array([i]), 'text/plain')));
      expect(new Set(keys).size).toBe(50);
      for (const key of keys) {
        expect(key).toMatch(/^[A-Za-z0-9_-]+$/);
        // 22 base64url characters hold 128 bits.
        expect(key.length).toBeGreaterThanOrEqual(22);
      }
      const read = await Promise.all(keys.map((k) => blobs().get(k)));
      expect(read.map((b) => b?.bytes[0])).toEqual(keys.map((_, i) => i));
    });

    it('is not changed by mutating the bytes given to put or taken from get', async () => {
      const bytes = new Uint8Array([1, 2, 3]);
      const key = await blobs().put(bytes, 'application/octet-stream');
      bytes[0] = 99;
      const first = await blobs().get(key);
      expect(Array.from(first!.bytes)).toEqual([1, 2, 3]);
      first!.bytes[1] = 99;
      expect(Array.from((await blobs().get(key))!.bytes)).toEqual([1, 2, 3]);
    });

    it('returns null for an unknown key', async () => {
      expect(await blobs().get('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).toBeNull();
      expect(await blobs().get('unknown')).toBeNull();
    });

    it('deletes, and deleting twice or an unknown key is a no-op', async () => {
      const keep = await blobs().put(new Uint8Array([7]), 'text/plain');
      const key = await blobs().put(new Uint8Array([1]), 'text/plain');
      await blobs().delete(key);
      expect(await blobs().get(key)).toBeNull();
      await blobs().delete(key);
      await blobs().delete('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
      expect((await blobs().get(keep))?.bytes[0]).toBe(7);
    });

    it('deletes many at once, skipping unknown and repeated keys, and leaves the others', async () => {
      // More than one S3 DeleteObjects call takes (1000), so a store that batches must loop.
      const keys = await putMany(blobs(), 1001);
      const keep = await blobs().put(new Uint8Array([7]), 'text/plain');
      await blobs().deleteMany([]);
      await blobs().deleteMany([...keys, keys[0]!, 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA']);
      const left = await Promise.all([keys[0]!, keys[999]!, keys[1000]!].map((k) => blobs().get(k)));
      expect(left).toEqual([null, null, null]);
      expect((await blobs().get(keep))?.bytes[0]).toBe(7);
      await blobs().deleteMany(keys);
    });

    it('serve (when the store has it): null for an unknown or deleted key; the file, by URL or by range, for a known one', async (ctx) => {
      const serve = blobs().serve?.bind(blobs());
      if (!serve) {
        // The method is optional: a store without it is served through get, which the other cases cover.
        ctx.annotate('no serve method: the files route reads through get');
        return;
      }
      expect(await serve('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', SERVE)).toBeNull();
      const bytes = new Uint8Array(Array.from({ length: 64 }, (_, i) => i));
      const key = await blobs().put(bytes, 'image/png');
      const served = (await serve(key, SERVE)) as ServedBlob;
      if ('redirect' in served) {
        const url = new URL(served.redirect);
        expect(['http:', 'https:']).toContain(url.protocol);
        const res = await fetch(url, { headers: { range: 'bytes=0-15' } });
        expect(res.status).toBe(206);
        expect(res.headers.get('content-type')).toBe('image/png');
        expect(res.headers.get('content-range')).toBe('bytes 0-15/64');
        expect(res.headers.get('content-disposition')).toBe('inline; filename="result.image-png"');
        expect(Array.from(new Uint8Array(await res.arrayBuffer()))).toEqual(Array.from(bytes.subarray(0, 16)));
      } else {
        expect(served.size).toBe(64);
        expect(served.mimeType).toBe('image/png');
        const chunks: number[] = [];
        for await (const chunk of served.read(10, 19)) chunks.push(...chunk);
        expect(chunks).toEqual(Array.from(bytes.subarray(10, 20)));
      }
      await blobs().delete(key);
      expect(await serve(key, SERVE)).toBeNull();
    });

    it('answers hostile keys with null and never throws, and deleting them touches nothing', async () => {
      const real = await blobs().put(new Uint8Array([42]), 'text/plain');
      for (const key of hostileKeys(real)) {
        await expect(blobs().get(key), `get(${JSON.stringify(key.slice(0, 40))})`).resolves.toBeNull();
        await expect(blobs().delete(key), `delete(${JSON.stringify(key.slice(0, 40))})`).resolves.toBeUndefined();
      }
      await expect(blobs().deleteMany(hostileKeys(real))).resolves.toBeUndefined();
      if (blobs().serve) {
        for (const key of hostileKeys(real)) {
          await expect(blobs().serve!(key, SERVE), `serve(${JSON.stringify(key.slice(0, 40))})`).resolves.toBeNull();
        }
      }
      const still = await blobs().get(real);
      expect(still?.bytes[0]).toBe(42);
      expect(still?.mimeType).toBe('text/plain');
    });
  });
}
