import { describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import type { User } from './fixture.js';
import { call, type Reply } from './http.js';
import { JSON_TYPE, withHeldGeneration, type ModeContext } from './kit.js';

/** POST /v1/generations/:id/cancel. */
export function defineCancelTests({ fx }: ModeContext): void {
  describe('cancel', () => {
    it("cancel of a missing or another user's generation is the same JSON 404 as GET", async () => {
      const alice = await fx.user(100);
      const bob = await fx.user(100);
      const created = await fx.create(alice, { modelId: 'echo', settings: { prompt: 'x' } });
      await fx.terminal(alice, created.body.generationId);
      const theirs = await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST', headers: bob.auth });
      const missing = await fx.call(`/v1/generations/${'B'.repeat(22)}/cancel`, { method: 'POST', headers: bob.auth });
      expectError(theirs, 404, 'not_found');
      expect(theirs.text).toBe(missing.text);
      expect((await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST' })).status).toBe(401);
      // A finished generation is unchanged, and the answer says so.
      const finished = await fx.call(`/v1/generations/${created.body.generationId}/cancel`, { method: 'POST', headers: alice.auth });
      expect(finished.status).toBe(200);
      expect(finished.body).toMatchObject({ status: 'completed', cancelled: false });
    });

    it('cancels a running generation: it fails with the failure fee and stays failed', async () => {
      const user = await fx.user(100);
      await withHeldGeneration(fx, user, async (id) => {
        const cancelled = await fx.call(`/v1/generations/${id}/cancel`, { method: 'POST', headers: user.auth });
        expect(cancelled.status, cancelled.text).toBe(200);
        expect(cancelled.contentType).toMatch(JSON_TYPE);
        expect(cancelled.body).toStrictEqual({ status: 'failed', price: 1, cancelled: true });
        expect((await fx.get(user, id)).body).toStrictEqual({ status: 'failed', price: 1 });
        const again = await fx.call(`/v1/generations/${id}/cancel`, { method: 'POST', headers: user.auth });
        expect(again.body).toStrictEqual({ status: 'failed', price: 1, cancelled: false });
        expect(await fx.balance(user)).toBe(99);
      });
    });
  });
}

/** expiresAfterSeconds on create. */
export function defineExpiryTests({ fx }: ModeContext): void {
  describe('expiresAfterSeconds on create', () => {
    it('is kept and shown as expiresAt once finished; a bad value is the JSON 400 naming the field, and nothing is created', async () => {
      const user = await fx.user(100);
      const r = await fx.create(user, { modelId: 'noop', expiresAfterSeconds: 3600 });
      expect(r.status, r.text).toBe(201);
      await fx.terminal(user, r.body.generationId);
      const details = await fx.call(`/v1/generations/${r.body.generationId}?include=details`, { headers: user.auth });
      expect(details.body.expiresAt).toBe(new Date(Date.parse(details.body.finishedAt) + 3_600_000).toISOString());
      for (const bad of [0, -5, 1.5, '60', null]) {
        const refused = await fx.create(user, { modelId: 'noop', expiresAfterSeconds: bad });
        expectError(refused, 400, 'invalid_request');
        expect(refused.body.error.details.map((d: { field: string }) => d.field)).toEqual(['expiresAfterSeconds']);
      }
      const list = await fx.call('/v1/generations', { headers: user.auth });
      expect(list.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([r.body.generationId]);
      expect(await fx.balance(user)).toBe(99);
    });
  });
}

/** DELETE /v1/generations/:id. */
export function defineDeleteTests({ fx }: ModeContext): void {
  describe('DELETE /v1/generations/:id', () => {
    const del = (user: User, id: string, options: { body?: string; headers?: Record<string, string> } = {}): Promise<Reply> =>
      fx.call(`/v1/generations/${id}`, { method: 'DELETE', headers: { ...user.auth, ...options.headers }, ...(options.body !== undefined ? { body: options.body } : {}) });

    it('answers 204 and removes everything a client could read; the charge stays; a second DELETE is 404', async () => {
      const user = await fx.user(100);
      const kept = await fx.create(user, { modelId: 'noop' });
      const r = await fx.create(user, { modelId: 'image', metadata: { project: 'x' } });
      const id = r.body.generationId as string;
      const view = await fx.terminal(user, id);
      await fx.terminal(user, kept.body.generationId);
      expect((await call(view.result!)).status).toBe(200);

      const deleted = await del(user, id);
      expect(deleted.status, deleted.text).toBe(204);
      expect(deleted.text).toBe('');

      const reads: Array<[string, Promise<Reply>]> = [
        ['poll', fx.get(user, id)],
        ['details', fx.call(`/v1/generations/${id}?include=details`, { headers: user.auth })],
        ['stream', fx.call(`/v1/generations/${id}/events`, { headers: user.auth })],
        ['deliveries', fx.call(`/v1/generations/${id}/webhook-deliveries`, { headers: user.auth })],
        ['cancel', fx.call(`/v1/generations/${id}/cancel`, { method: 'POST', headers: user.auth })],
        ['file', call(view.result!)],
        ['again', del(user, id)],
      ];
      const problems: string[] = [];
      for (const [label, reply] of reads) {
        const got = await reply;
        if (got.status !== 404 || got.body?.error?.code !== 'not_found') problems.push(`${label}: ${got.status} ${got.text.slice(0, 120)}`);
      }
      expect(problems).toEqual([]);
      const list = await fx.call('/v1/generations', { headers: user.auth });
      expect(list.body.data.map((g: { generationId: string }) => g.generationId)).toEqual([kept.body.generationId]);
      // Money records are never deleted: the image's 5 and the noop's 1 stay charged.
      expect(await fx.balance(user)).toBe(94);
      expect((await fx.get(user, kept.body.generationId)).status).toBe(200);
    });

    it('cancels a running generation first, charged as a cancel', async () => {
      const user = await fx.user(100);
      await withHeldGeneration(fx, user, async (id) => {
        const deleted = await del(user, id);
        expect(deleted.status, deleted.text).toBe(204);
        expectError(await fx.get(user, id), 404, 'not_found');
        // The held model's failure fee, as a cancel of a running generation costs.
        expect(await fx.balance(user)).toBe(99);
      });
    });

    it("another user's, a missing or a malformed id answers the GET's 404; a body is 400; neither deletes", async () => {
      const alice = await fx.user(100);
      const bob = await fx.user(100);
      const created = await fx.create(alice, { modelId: 'noop' });
      const id = created.body.generationId as string;
      await fx.terminal(alice, id);
      const missing = await fx.get(bob, 'B'.repeat(22));
      const theirs = await del(bob, id);
      expectError(theirs, 404, 'not_found');
      expect(theirs.text).toBe(missing.text);
      for (const bad of ['x', 'a'.repeat(300), '..%2F..%2Fv1%2Fbalance', '%00', '%ZZ', 'B'.repeat(22)]) {
        const reply = await del(alice, bad);
        expectError(reply, 404, 'not_found');
        expect(reply.text, bad).toBe(missing.text);
      }
      expect((await fx.call(`/v1/generations/${id}`, { method: 'DELETE' })).status).toBe(401);
      for (const body of ['{}', '{"force":true}', 'not json']) {
        expectError(await del(alice, id, { body, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
      }
      expect((await fx.get(alice, id)).status).toBe(200);
      expect((await del(alice, id)).status).toBe(204);
    });
  });
}
