import { describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import { IMAGE_BYTES } from './fixture.js';
import { call } from './http.js';
import type { ModeContext } from './kit.js';

/** A multipart/form-data body with these file parts. */
function form(files: Array<{ name: string; type: string; bytes: Uint8Array }>): { body: Uint8Array; type: string } {
  const boundary = `conformance-${files.length}-boundary`;
  const parts = files.flatMap((f) => [
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${f.name}"\r\nContent-Type: ${f.type}\r\n\r\n`),
    Buffer.from(f.bytes),
    Buffer.from('\r\n'),
  ]);
  return { body: new Uint8Array(Buffer.concat([...parts, Buffer.from(`--${boundary}--\r\n`)])), type: `multipart/form-data; boundary=${boundary}` };
}

/** POST /v1/uploads (raw and multipart) and the upload as a media input: the owner's, and nobody else's. */
export function defineUploadTests({ fx }: ModeContext): void {
  describe('POST /v1/uploads', () => {
    it('keeps a raw body and a multipart file byte for byte, each at its own signed URL', async () => {
      const user = await fx.user(10);
      const raw = await fx.call('/v1/uploads', { method: 'POST', headers: { ...user.auth, 'content-type': 'image/png' }, body: IMAGE_BYTES });
      expect(raw.status).toBe(201);
      const multi = form([{ name: 'a.png', type: 'image/png', bytes: IMAGE_BYTES }]);
      const multipart = await fx.call('/v1/uploads', { method: 'POST', headers: { ...user.auth, 'content-type': multi.type }, body: multi.body });
      expect(multipart.status).toBe(201);
      for (const { body } of [raw, multipart]) {
        expect(body).toEqual({ id: expect.any(String), url: expect.stringMatching(/\/v1\/files\//), expiresAt: expect.any(String) });
        expect(body.url.startsWith(`${fx.baseUrl}/v1/files/`)).toBe(true);
        const file = await call(body.url);
        expect(file.status).toBe(200);
        expect(file.contentType).toBe('image/png');
        expect(file.bytes.equals(Buffer.from(IMAGE_BYTES))).toBe(true);
      }
    });

    it('refuses a type it does not take (415), no file or two files in a form (400), and needs a key (401)', async () => {
      const user = await fx.user(10);
      expectError(await fx.call('/v1/uploads', { method: 'POST', headers: { ...user.auth, 'content-type': 'text/x-nope' }, body: 'hi' }), 415, 'unsupported_media_type');
      const two = form([
        { name: 'a.png', type: 'image/png', bytes: IMAGE_BYTES },
        { name: 'b.png', type: 'image/png', bytes: IMAGE_BYTES },
      ]);
      expectError(await fx.call('/v1/uploads', { method: 'POST', headers: { ...user.auth, 'content-type': two.type }, body: two.body }), 400, 'invalid_request');
      const none = form([]);
      expectError(await fx.call('/v1/uploads', { method: 'POST', headers: { ...user.auth, 'content-type': none.type }, body: none.body }), 400, 'invalid_request');
      expectError(await fx.call('/v1/uploads', { method: 'POST', headers: { 'content-type': 'image/png' }, body: IMAGE_BYTES }), 401, 'unauthorized');
    });

    it("is a media input of its owner's generations and of nobody else's (400 naming the input)", async () => {
      const alice = await fx.user(10);
      const bob = await fx.user(10);
      const up = await fx.call('/v1/uploads', { method: 'POST', headers: { ...alice.auth, 'content-type': 'image/png' }, body: IMAGE_BYTES });
      const settings = { prompt: 'p', refs: [up.body.url] };
      const mine = await fx.create(alice, { modelId: 'settings', settings });
      expect(mine.status).toBe(201);
      expect(await fx.terminal(alice, mine.body.generationId)).toMatchObject({ status: 'completed', result: JSON.stringify(settings) });
      const theirs = await fx.create(bob, { modelId: 'settings', settings });
      expectError(theirs, 400, 'invalid_settings');
      expect(theirs.body.error.details).toEqual([{ field: 'settings.refs.0', code: 'invalid_url', message: expect.stringMatching(/not one of your files/) }]);
      const forged = await fx.create(alice, { modelId: 'settings', settings: { prompt: 'p', refs: [up.body.url.replace(/sig=[^&]{4}/, 'sig=AAAA')] } });
      expectError(forged, 400, 'invalid_settings');
      expect(await fx.balance(bob)).toBe(10);
    });
  });
}
