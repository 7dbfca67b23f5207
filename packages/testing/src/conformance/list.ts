import { describe, expect, it } from 'vitest';
import { until } from '../until.js';
import { expectError } from './expect-error.js';
import type { Reply } from './http.js';
import { JSON_TYPE, mismatches, withHeldGeneration, type ModeContext } from './kit.js';

/** The list, details, quotes and metadata. */
export function defineListTests({ fx }: ModeContext): void {
  describe('list, details, quotes and metadata', () => {
    const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

    it("GET /v1/generations lists only the caller's generations, newest first, in pages", async () => {
      const alice = await fx.user(100);
      const bob = await fx.user(100);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await fx.create(alice, { modelId: 'noop' })).body.generationId);
        // Distinct creation times make "newest first" the reverse of creation order: the next create waits for the clock.
        const created = Date.now();
        await until(() => Date.now() > created, { what: 'the clock to move on', intervalMs: 0 });
      }
      await fx.create(bob, { modelId: 'noop' });
      for (const id of ids) await fx.terminal(alice, id);

      const all = await fx.call('/v1/generations', { headers: alice.auth });
      expect(all.status, all.text).toBe(200);
      expect(all.contentType).toMatch(JSON_TYPE);
      expect(Object.keys(all.body).sort()).toEqual(['data', 'nextCursor']);
      expect(all.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([...ids].reverse());
      expect(all.body.nextCursor).toBeNull();
      for (const item of all.body.data) {
        expect(item).toStrictEqual({
          generationId: item.generationId,
          modelId: 'noop',
          status: 'completed',
          createdAt: expect.stringMatching(ISO),
          startedAt: expect.stringMatching(ISO),
          finishedAt: expect.stringMatching(ISO),
          result: expect.any(String),
          price: 1,
          // A completed generation's progress is whole, whatever its provider reported (or if it reported none).
          progress: { fraction: 1 },
        });
      }

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: Reply = await fx.call(`/v1/generations?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { headers: alice.auth });
        expect(page.status, page.text).toBe(200);
        expect(page.body.data.length).toBeLessThanOrEqual(2);
        seen.push(...page.body.data.map((g: { generationId: string }) => g.generationId));
        cursor = page.body.nextCursor;
        pages++;
      } while (cursor !== null && pages < 10);
      expect(seen).toEqual([...ids].reverse());
      expect(pages).toBe(3);
      expectError(await fx.call('/v1/generations', {}), 401, 'unauthorized');
    });

    it('filters the list by status and model', async () => {
      const user = await fx.user(100);
      const ok = (await fx.create(user, { modelId: 'noop' })).body.generationId;
      const failed = (await fx.create(user, { modelId: 'fail' })).body.generationId;
      await fx.terminal(user, ok);
      await fx.terminal(user, failed);
      const byStatus = await fx.call('/v1/generations?status=failed', { headers: user.auth });
      expect(byStatus.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([failed]);
      const byModel = await fx.call('/v1/generations?modelId=noop', { headers: user.auth });
      expect(byModel.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([ok]);
      const none = await fx.call('/v1/generations?modelId=fail&status=completed', { headers: user.auth });
      expect(none.body).toStrictEqual({ data: [], nextCursor: null });
    });

    it('answers a bad limit, status or cursor with 400 invalid_request', async () => {
      const user = await fx.user(100);
      const bad = ['limit=0', 'limit=101', 'limit=-1', 'limit=1.5', 'limit=abc', 'limit=', 'limit=1&limit=2', 'status=done', 'status=', 'cursor=abc', 'cursor=%00', `cursor=${'A'.repeat(300)}`, 'cursor=eyJhIjoxfQ'];
      const results = [];
      for (const q of bad) results.push({ label: q, reply: await fx.call(`/v1/generations?${q}`, { headers: user.auth }), status: 400, code: 'invalid_request' });
      expect(mismatches(results)).toEqual([]);
      for (const r of results) expectError(r.reply, 400, 'invalid_request');
      expect((await fx.call('/v1/generations?limit=100', { headers: user.auth })).status).toBe(200);
    });

    it('/details (and ?include=details) gives the list item; without it the exact contract shape', async () => {
      const user = await fx.user(100);
      const created = await fx.create(user, { modelId: 'echo', settings: { prompt: 'hi' }, metadata: { order: 'A-1' } });
      const id = created.body.generationId;
      const plain = await fx.terminal(user, id);
      expect(Object.keys(plain).sort()).toEqual(['price', 'result', 'status']);
      const details = await fx.call(`/v1/generations/${id}?include=details`, { headers: user.auth });
      expect(details.status, details.text).toBe(200);
      expect(details.body).toStrictEqual({
        generationId: id,
        modelId: 'echo',
        status: 'completed',
        createdAt: expect.stringMatching(ISO),
        startedAt: expect.stringMatching(ISO),
        finishedAt: expect.stringMatching(ISO),
        result: plain.result,
        price: plain.price,
        progress: { fraction: 1 },
        metadata: { order: 'A-1' },
      });
      const path = await fx.call(`/v1/generations/${id}/details`, { headers: user.auth });
      expect(path.status, path.text).toBe(200);
      expect(path.body).toStrictEqual(details.body);
      expectError(await fx.call(`/v1/generations/${id}?include=everything`, { headers: user.auth }), 400, 'invalid_request');
      const other = await fx.user(100);
      const theirsByPath = await fx.call(`/v1/generations/${id}/details`, { headers: other.auth });
      expectError(theirsByPath, 404, 'not_found');
      expect(theirsByPath.text).toBe((await fx.call(`/v1/generations/${'C'.repeat(22)}/details`, { headers: other.auth })).text);
      const theirs = await fx.call(`/v1/generations/${id}?include=details`, { headers: other.auth });
      const missing = await fx.call(`/v1/generations/${'C'.repeat(22)}?include=details`, { headers: other.auth });
      expectError(theirs, 404, 'not_found');
      expect(theirs.text).toBe(missing.text);
    });

    it('a failed generation says why in words safe for its owner, never the internal message', async () => {
      const user = await fx.user(100);
      const failed = (await fx.create(user, { modelId: 'fail' })).body.generationId;
      const crashed = (await fx.create(user, { modelId: 'crash' })).body.generationId;
      await fx.terminal(user, failed);
      await fx.terminal(user, crashed);
      for (const id of [failed, crashed]) {
        const d = await fx.call(`/v1/generations/${id}?include=details`, { headers: user.auth });
        expect(d.body.status).toBe('failed');
        expect(d.body.error.code).toBe('provider_error');
        expect(typeof d.body.error.message).toBe('string');
        expect(d.text).not.toContain('the fake model failed');
        expect(d.text).not.toContain('a provider bug');
        expect(d.text).not.toMatch(/at .*\.ts:\d+/);
      }
    });

    it('a cancelled generation fails with the reason cancelled', async () => {
      const user = await fx.user(100);
      await withHeldGeneration(fx, user, async (id) => {
        await fx.call(`/v1/generations/${id}/cancel`, { method: 'POST', headers: user.auth });
        const d = await fx.call(`/v1/generations/${id}?include=details`, { headers: user.auth });
        expect(d.body).toMatchObject({ status: 'failed', price: 1, error: { code: 'cancelled' } });
      });
    });

    it('POST /v1/quotes answers price and balance and reserves nothing', async () => {
      const user = await fx.user(50);
      const q = await fx.call('/v1/quotes', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body: JSON.stringify({ modelId: 'echo', settings: { prompt: 'x' } }) });
      expect(q.status, q.text).toBe(200);
      expect(q.contentType).toMatch(JSON_TYPE);
      expect(q.body).toStrictEqual({ price: 10, balance: 50 });
      expect(await fx.balance(user)).toBe(50);
      expect((await fx.call('/v1/generations', { headers: user.auth })).body.data).toEqual([]);
      const post = (body: string): Promise<Reply> => fx.call('/v1/quotes', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json' }, body });
      expectError(await post('{"modelId":"nope"}'), 404, 'model_not_found');
      expectError(await post('{"modelId":"echo","settings":{}}'), 400, 'invalid_settings');
      expectError(await post('{"settings":{}}'), 400, 'invalid_request');
      expectError(await post('{'), 400, 'invalid_json');
      expectError(await fx.call('/v1/quotes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"modelId":"echo"}' }), 401, 'unauthorized');
      // A quote for more than the balance is still a quote: the create is what answers 402.
      const poor = await fx.user(1);
      expect((await fx.call('/v1/quotes', { method: 'POST', headers: { ...poor.auth, 'content-type': 'application/json' }, body: '{"modelId":"echo","settings":{"prompt":"x"}}' })).body).toStrictEqual({ price: 10, balance: 1 });
    });

    it('checks metadata: at most 16 string values with bounded keys and values', async () => {
      const user = await fx.user(100);
      const many = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v']));
      const bad: unknown[] = [many, { '': 'v' }, { ['k'.repeat(65)]: 'v' }, { k: 'v'.repeat(513) }, { k: 1 }, { k: null }, { k: ['v'] }, ['v'], 'v', 7];
      for (const metadata of bad) {
        const r = await fx.create(user, { modelId: 'noop', metadata });
        expectError(r, 400, 'invalid_request');
        expect(r.body.error.details?.[0]?.field ?? '', JSON.stringify(metadata).slice(0, 80)).toMatch(/^metadata/);
      }
      expect(await fx.balance(user)).toBe(100);
      const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`.padEnd(64, 'x'), 'v'.repeat(512)]));
      const ok = await fx.create(user, { modelId: 'noop', metadata: sixteen });
      expect(ok.status, ok.text).toBe(201);
      await fx.terminal(user, ok.body.generationId);
      const d = await fx.call(`/v1/generations/${ok.body.generationId}?include=details`, { headers: user.auth });
      expect(d.body.metadata).toStrictEqual(sixteen);
    });

    it('makes metadata part of the Idempotency-Key request', async () => {
      const user = await fx.user(100);
      const send = (metadata: unknown): Promise<Reply> =>
        fx.call('/v1/generations', {
          method: 'POST',
          headers: { ...user.auth, 'content-type': 'application/json', 'idempotency-key': 'meta-1' },
          body: JSON.stringify({ modelId: 'noop', metadata }),
        });
      const first = await send({ a: '1' });
      expect(first.status).toBe(201);
      expect((await send({ a: '1' })).body).toStrictEqual(first.body);
      expectError(await send({ a: '2' }), 422, 'idempotency_mismatch');
    });

    it('refuses a required text setting of only white space, charging nothing', async () => {
      const user = await fx.user(100);
      for (const prompt of [' ', '\n\t ', '\u00a0\u2003']) {
        const r = await fx.create(user, { modelId: 'echo', settings: { prompt } });
        expectError(r, 400, 'invalid_settings');
        expect(r.body.error.details).toEqual([expect.objectContaining({ field: 'settings.prompt', code: 'required' })]);
      }
      expect(await fx.balance(user)).toBe(100);
    });
  });
}
