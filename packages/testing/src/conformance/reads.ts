import { randomBytes } from 'node:crypto';
import { FileUrlSigner } from '@genservice/core';
import { describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import { IMAGE_BYTES, VIDEO_BYTES, type User } from './fixture.js';
import { call } from './http.js';
import { JSON_TYPE, mismatches, withHeld, type ModeContext } from './kit.js';

/** GET /v1/generations/:id: the exact shape of each status. */
export function defineGetTests({ fx }: ModeContext): void {
  describe('GET /v1/generations/:id', () => {
    it('shows pending and processing as { status } only, and completed as { status, result, price }', async () => {
      const user = await fx.user(100);
      const ids: string[] = [];
      await withHeld(fx, user, ids, async () => {
        const before = fx.gate.total;
        const a = await fx.create(user, { modelId: 'held' });
        expect(a.status).toBe(201);
        ids.push(a.body.generationId);
        await fx.gate.reached(before + 1);
        // `held` runs one at a time, so the second one waits in the queue.
        const b = await fx.create(user, { modelId: 'held' });
        expect(b.status).toBe(201);
        ids.push(b.body.generationId);

        const processing = await fx.get(user, a.body.generationId);
        expect(processing.status).toBe(200);
        expect(processing.contentType).toMatch(JSON_TYPE);
        expect(processing.body).toStrictEqual({ status: 'processing' });
        const pending = await fx.get(user, b.body.generationId);
        expect(pending.body).toStrictEqual({ status: 'pending' });

        fx.gate.open();
        expect(await fx.terminal(user, a.body.generationId)).toStrictEqual({ status: 'completed', result: 'ok', price: 4 });
        expect(await fx.terminal(user, b.body.generationId)).toStrictEqual({ status: 'completed', result: 'ok', price: 4 });
      });
    });

    it('gives a text model its text as the result, and the settled price', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'echo', settings: { prompt: 'hello, wörld ✓' } });
      expect(await fx.terminal(user, r.body.generationId)).toStrictEqual({ status: 'completed', result: 'echo: hello, wörld ✓', price: 10 });
      const cheaper = await fx.create(user, { modelId: 'discount' });
      expect(await fx.terminal(user, cheaper.body.generationId)).toStrictEqual({ status: 'completed', result: 'cheap', price: 6 });
      expect(await fx.balance(user)).toBe(100 - 10 - 6);
    });

    it('shows a failed generation as { status, price } with the failure fee', async () => {
      const user = await fx.user(100);
      const failed = await fx.create(user, { modelId: 'fail' });
      expect(await fx.terminal(user, failed.body.generationId)).toStrictEqual({ status: 'failed', price: 2 });
      const crashed = await fx.create(user, { modelId: 'crash' });
      expect(await fx.terminal(user, crashed.body.generationId)).toStrictEqual({ status: 'failed', price: 0 });
      expect(await fx.balance(user)).toBe(98);
    });

    it('retries a retryable provider error and completes', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'flaky' });
      expect(await fx.terminal(user, r.body.generationId)).toStrictEqual({ status: 'completed', result: 'recovered', price: 3 });
      expect(fx.provider.callsFor(r.body.generationId)).toHaveLength(3);
    });

    it('answers a missing or malformed id with a JSON 404', async () => {
      const user = await fx.user();
      const ids = ['a'.repeat(22), 'x', 'a'.repeat(300), '..%2F..%2Fv1%2Fbalance', '%00', 'null', '%ZZ', '%E0%A4%A'];
      const results = [];
      for (const id of ids) {
        results.push({ label: `GET ${id}`, reply: await fx.call(`/v1/generations/${id}`, { headers: user.auth }), status: 404, code: 'not_found' });
        results.push({
          label: `cancel ${id}`,
          reply: await fx.call(`/v1/generations/${id}/cancel`, { method: 'POST', headers: user.auth }),
          status: 404,
          code: 'not_found',
        });
      }
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, 404, 'not_found');
    });
  });
}

/** Result files: signed URLs that download the exact bytes, and only while valid. */
export function defineFileTests({ fx }: ModeContext): void {
  describe('result files', () => {
    async function fileResult(user: User, modelId: string): Promise<string> {
      const r = await fx.create(user, { modelId });
      expect(r.status).toBe(201);
      const view = await fx.terminal(user, r.body.generationId);
      expect(view.status).toBe('completed');
      expect(Object.keys(view).sort()).toEqual(['price', 'result', 'status']);
      expect(view.price).toBe(5);
      return view.result!;
    }

    it('gives an image its absolute URL, which downloads the bytes with their content type and no key', async () => {
      const user = await fx.user();
      for (const [modelId, bytes, type] of [
        ['image', IMAGE_BYTES, 'image/png'],
        ['video-put', VIDEO_BYTES, 'video/mp4'],
      ] as const) {
        const url = await fileResult(user, modelId);
        expect(url.startsWith(`${fx.baseUrl}/v1/files/`), url).toBe(true);
        const file = await call(url);
        expect(file.status).toBe(200);
        expect(file.contentType).toBe(type);
        expect(Buffer.compare(file.bytes, Buffer.from(bytes))).toBe(0);
      }
    });

    it('never serves the file from a tampered or expired URL', async () => {
      const user = await fx.user();
      const good = new URL(await fileResult(user, 'image'));
      const key = decodeURIComponent(good.pathname.slice(good.pathname.lastIndexOf('/') + 1));
      const flip = (s: string): string => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
      const exp = good.searchParams.get('exp')!;
      const sig = good.searchParams.get('sig')!;
      const base = `${good.origin}${good.pathname}`;
      const signer = new FileUrlSigner(fx.secret, 60);
      const expiredPath = signer.sign(key, Date.now() - 2 * 3600_000);
      const bad: Array<[string, string]> = [
        ['signature changed', `${base}?exp=${exp}&sig=${flip(sig)}`],
        ['expiry moved', `${base}?exp=${Number(exp) + 3600}&sig=${sig}`],
        ['expiry in the past', `${base}?exp=${Number(exp) - 7200}&sig=${sig}`],
        ['no signature', `${base}?exp=${exp}`],
        ['no query', base],
        ['another key', `${fx.baseUrl}/v1/files/${encodeURIComponent(flip(key))}?exp=${exp}&sig=${sig}`],
        ['validly signed but expired', `${fx.baseUrl}${expiredPath}`],
      ];
      const problems: string[] = [];
      for (const [label, url] of bad) {
        const r = await call(url);
        if (![403, 404].includes(r.status) || !JSON_TYPE.test(r.contentType) || r.body?.error === undefined) {
          problems.push(`${label}: ${r.status} ${r.contentType}`);
        }
        if (Buffer.from(IMAGE_BYTES).equals(r.bytes)) problems.push(`${label}: served the file`);
      }
      expect(problems).toEqual([]);
      // The same signer with a current time works: the URL above failed for its expiry alone.
      const fresh = await call(`${fx.baseUrl}${signer.sign(key, Date.now())}`);
      expect(fresh.status).toBe(200);
      expect(Buffer.from(IMAGE_BYTES).equals(fresh.bytes)).toBe(true);
    });
  });
}

/** Another user's generation answers exactly like a missing one. */
export function defineOwnershipTests({ fx }: ModeContext): void {
  describe('ownership', () => {
    it("answers another user's generation exactly like a missing one", async () => {
      const alice = await fx.user();
      const bob = await fx.user();
      const created = await fx.create(alice, { modelId: 'noop' });
      await fx.terminal(alice, created.body.generationId);
      const missingId = randomBytes(16).toString('base64url');

      const theirs = await fx.get(bob, created.body.generationId);
      const missing = await fx.get(bob, missingId);
      expectError(theirs, 404, 'not_found');
      expect(theirs.status).toBe(missing.status);
      expect(theirs.contentType).toBe(missing.contentType);
      expect(theirs.text).toBe(missing.text);

      const cancelTheirs = await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST', headers: bob.auth });
      const cancelMissing = await fx.call(`/v1/generations/${missingId}/cancel`, { method: 'POST', headers: bob.auth });
      expectError(cancelTheirs, 404, 'not_found');
      expect(cancelTheirs.text).toBe(cancelMissing.text);

      expect((await fx.get(alice, created.body.generationId)).status).toBe(200);
    });
  });
}
