import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Fixture, User } from './fixture.js';
import { until } from '../until.js';
import { expectError } from './expect-error.js';

/** The batch routes, on every adapter: created whole or not at all, read, listed, cancelled, owner-only. */
export function defineBatchTests(fixture: () => Fixture): void {
  const post = (user: User, body: unknown, headers: Record<string, string> = {}) =>
    fixture().call('/v1/batches', { method: 'POST', headers: { ...user.auth, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const getBatch = (user: User, id: string) => fixture().call(`/v1/batches/${id}`, { headers: user.auth });

  async function completed(user: User, id: string): Promise<Record<string, any>> {
    const read = async (): Promise<Record<string, any>> => {
      const r = await getBatch(user, id);
      expect(r.status, r.text).toBe(200);
      return r.body;
    };
    return until(read, { accept: (batch) => batch.status === 'completed', timeoutMs: 20_000, what: `batch ${id} to complete` });
  }

  describe('batches', () => {
    it('creates every request as a generation, reserves the total, and completes with exact counts and price', async () => {
      const fx = fixture();
      const user = await fx.user(100);
      const requests = [
        { modelId: 'echo', settings: { prompt: 'a' }, metadata: { row: '0' } },
        { modelId: 'noop' },
        { modelId: 'fail' },
        { modelId: 'echo', settings: { prompt: 'b' } },
      ];
      const r = await post(user, { requests });
      expect(r.status, r.text).toBe(201);
      expect(Object.keys(r.body)).toEqual(['batchId', 'generationIds']);
      expect(r.body.generationIds).toHaveLength(4);
      const done = await completed(user, r.body.batchId);
      // echo 10 + noop 1 + fail's fee 2 + echo 10.
      expect(done).toStrictEqual({ status: 'completed', counts: { pending: 0, processing: 0, completed: 3, failed: 1 }, price: 23 });
      expect(await fx.balance(user)).toBe(77);
      expect((await fx.get(user, r.body.generationIds[0])).body).toStrictEqual({ status: 'completed', result: 'echo: a', price: 10 });
      const page1 = await fx.call(`/v1/batches/${r.body.batchId}/generations?limit=3`, { headers: user.auth });
      expect(page1.status, page1.text).toBe(200);
      expect(page1.body.data).toHaveLength(3);
      expect(typeof page1.body.nextCursor).toBe('string');
      const page2 = await fx.call(`/v1/batches/${r.body.batchId}/generations?limit=3&cursor=${page1.body.nextCursor}`, { headers: user.auth });
      expect(page2.body.data).toHaveLength(1);
      expect(page2.body.nextCursor).toBeNull();
      const listed = [...page1.body.data, ...page2.body.data].map((g: { generationId: string }) => g.generationId).sort();
      expect(listed).toEqual([...r.body.generationIds].sort());
    });

    it('refuses the whole batch with a 400 naming each bad request by index; nothing is created or held', async () => {
      const fx = fixture();
      const user = await fx.user(100);
      const r = await post(user, { requests: [{ modelId: 'noop' }, { modelId: 'no-such-model' }, { modelId: 'echo' }, { modelId: 'noop' }, { modelId: 7 }] });
      expectError(r, 400, 'invalid_request');
      const fields = r.body.error.details.map((d: { field: string }) => d.field);
      expect(fields.some((f: string) => f.startsWith('requests[4]'))).toBe(true);
      const semantic = await post(user, { requests: [{ modelId: 'noop' }, { modelId: 'no-such-model' }, { modelId: 'echo' }, { modelId: 'noop' }] });
      expectError(semantic, 400, 'invalid_request');
      const bad = semantic.body.error.details.map((d: { field: string }) => /^requests\[(\d+)\]/.exec(d.field)?.[1]);
      expect([...new Set(bad)].sort()).toEqual(['1', '2']);
      expect(await fx.balance(user)).toBe(100);
      const list = await fx.call('/v1/generations', { headers: user.auth });
      expect(list.body.data).toEqual([]);
      expectError(await post(user, { requests: [] }), 400, 'invalid_request');
      expectError(await post(user, { requests: Array.from({ length: 1001 }, () => ({ modelId: 'noop' })) }), 400, 'invalid_request');
      expectError(await post(user, []), 400, 'invalid_request');
    });

    it('refuses with 402 when the balance cannot cover the total; nothing is created or held', async () => {
      const fx = fixture();
      const user = await fx.user(25);
      const r = await post(user, { requests: [{ modelId: 'echo', settings: { prompt: 'a' } }, { modelId: 'echo', settings: { prompt: 'b' } }, { modelId: 'echo', settings: { prompt: 'c' } }] });
      expectError(r, 402, 'insufficient_funds');
      expect(await fx.balance(user)).toBe(25);
      expect((await fx.call('/v1/generations', { headers: user.auth })).body.data).toEqual([]);
    });

    it('answers the same batch for a retry with the same Idempotency-Key, 422 for another body', async () => {
      const fx = fixture();
      const user = await fx.user(100);
      const body = { requests: [{ modelId: 'noop' }, { modelId: 'noop' }] };
      const first = await post(user, body, { 'idempotency-key': 'batch-key-1' });
      expect(first.status, first.text).toBe(201);
      const again = await post(user, body, { 'idempotency-key': 'batch-key-1' });
      expect(again.status, again.text).toBe(201);
      expect(again.body).toEqual(first.body);
      expectError(await post(user, { requests: [{ modelId: 'noop' }] }, { 'idempotency-key': 'batch-key-1' }), 422, 'idempotency_mismatch');
      await completed(user, first.body.batchId);
      expect(await fx.balance(user)).toBe(98);
    });

    it("answers another user's batch exactly like a missing one, on every batch route", async () => {
      const fx = fixture();
      const alice = await fx.user(100);
      const bob = await fx.user(100);
      const created = await post(alice, { requests: [{ modelId: 'noop' }] });
      expect(created.status, created.text).toBe(201);
      const id = created.body.batchId;
      const missing = `batch_${randomBytes(16).toString('base64url')}`;
      for (const [path, method] of [
        ['', 'GET'],
        ['/generations', 'GET'],
        ['/cancel', 'POST'],
      ] as const) {
        const theirs = await fx.call(`/v1/batches/${id}${path}`, { method, headers: bob.auth });
        const none = await fx.call(`/v1/batches/${missing}${path}`, { method, headers: bob.auth });
        expectError(theirs, 404, 'not_found');
        expect(theirs.text).toBe(none.text);
      }
      expectError(await fx.call('/v1/batches/not-an-id', { headers: bob.auth }), 404, 'not_found');
      await completed(alice, id);
    });

    it('cancels the unfinished generations of a batch, free while pending', async () => {
      const fx = fixture();
      const user = await fx.user(100);
      const before = fx.gate.total;
      const r = await post(user, { requests: [{ modelId: 'held' }, { modelId: 'held' }, { modelId: 'held' }] });
      expect(r.status, r.text).toBe(201);
      try {
        await fx.gate.reached(before + 1);
        const cancelled = await fx.call(`/v1/batches/${r.body.batchId}/cancel`, { method: 'POST', headers: user.auth });
        expect(cancelled.status, cancelled.text).toBe(200);
        expect(cancelled.body.cancelled).toBeGreaterThanOrEqual(1);
        const done = await completed(user, r.body.batchId);
        expect(done.counts).toEqual({ pending: 0, processing: 0, completed: 0, failed: 3 });
      } finally {
        fx.gate.release();
      }
    });
  });
}
