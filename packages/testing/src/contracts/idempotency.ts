import { describe, expect, it } from 'vitest';
import type { IdempotencyStore } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

/** The IdempotencyStore half of `runPortContracts`. */
export function describeIdempotencyContract(
  make: () => Promise<{ idempotency: IdempotencyStore; close(): Promise<void> }>,
): void {
  describe('IdempotencyStore', () => {
    const ports = useFresh(make);
    const store = (): IdempotencyStore => ports().idempotency;

    it('answers new, then in_progress, then done with the generation and the first request hash', async () => {
      const user = uid('user');
      const key = uid('key');
      expect(await store().begin(user, key, 'hash-1', T0, 'gen-1')).toEqual({ state: 'new' });
      expect(await store().begin(user, key, 'hash-1', T0 + 1, 'gen-x')).toEqual({ state: 'in_progress', requestHash: 'hash-1', generationId: 'gen-1', startedAt: T0 });
      // The first request's hash, so a different body can be told apart while the first is still running.
      expect(await store().begin(user, key, 'hash-other', T0 + 1, 'gen-y')).toEqual({ state: 'in_progress', requestHash: 'hash-1', generationId: 'gen-1', startedAt: T0 });
      expect(await store().finish(user, key, 'gen-1')).toBe(true);
      expect(await store().begin(user, key, 'hash-1', T0 + 2, 'gen-1')).toEqual({ state: 'done', generationId: 'gen-1', requestHash: 'hash-1' });
      // The caller compares hashes to spot a reused key with another body, so the stored one must come back.
      expect(await store().begin(user, key, 'hash-other', T0 + 2, 'gen-1')).toEqual({ state: 'done', generationId: 'gen-1', requestHash: 'hash-1' });
    });

    it('gives new to exactly one of 30 concurrent begins', async () => {
      const user = uid('user');
      const key = uid('key');
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => store().begin(user, key, `hash-${i}`, T0, 'gen-1')));
      expect(results.filter((r) => r.state === 'new')).toHaveLength(1);
      expect(results.filter((r) => r.state === 'in_progress')).toHaveLength(29);
    });

    it('scopes keys per user, including ids that would collide if naively joined', async () => {
      const key = uid('key');
      const alice = uid('alice');
      const bob = uid('bob');
      expect((await store().begin(alice, key, 'h', T0, 'gen-1')).state).toBe('new');
      expect((await store().begin(bob, key, 'h', T0, 'gen-1')).state).toBe('new');
      await store().finish(alice, key, 'gen-1');
      expect((await store().begin(bob, key, 'h', T0, 'gen-1')).state).toBe('in_progress');
      expect(await store().begin(alice, key, 'h', T0, 'gen-1')).toMatchObject({ state: 'done', generationId: 'gen-1' });

      const base = uid('u');
      expect((await store().begin(`${base}:a`, 'b', 'h', T0, 'gen-1')).state).toBe('new');
      expect((await store().begin(base, 'a:b', 'h', T0, 'gen-1')).state).toBe('new');
      expect((await store().begin(`${base}\0a`, 'b', 'h', T0, 'gen-1')).state).toBe('new');
      expect((await store().begin(base, 'a\0b', 'h', T0, 'gen-1')).state).toBe('new');
      expect((await store().begin(`${base}a`, 'b', 'h', T0, 'gen-1')).state).toBe('new');
      expect((await store().begin(base, 'ab', 'h', T0, 'gen-1')).state).toBe('new');
    });

    it('treats keys as exact strings', async () => {
      const user = uid('user');
      const key = uid('Key');
      expect((await store().begin(user, key, 'h', T0, 'gen-1')).state).toBe('new');
      for (const variant of [key.toLowerCase(), key.toUpperCase(), ` ${key}`, `${key} `, `${key}%`, key.slice(0, -1)]) {
        expect((await store().begin(user, variant, 'h', T0, 'gen-1')).state).toBe('new');
      }
    });

    it('lets an abandoned key begin again, with its new request', async () => {
      const user = uid('user');
      const key = uid('key');
      expect((await store().begin(user, key, 'hash-1', T0, 'gen-1')).state).toBe('new');
      await store().abandon(user, key, 'gen-1');
      expect((await store().begin(user, key, 'hash-2', T0 + 1, 'gen-2')).state).toBe('new');
      await store().finish(user, key, 'gen-2');
      expect(await store().begin(user, key, 'hash-2', T0 + 2, 'gen-1')).toEqual({ state: 'done', generationId: 'gen-2', requestHash: 'hash-2' });
    });

    it('ignores abandoning an unknown key, and never forgets a finished one', async () => {
      const user = uid('user');
      const key = uid('key');
      await store().abandon(user, uid('unknown'), 'gen-1');
      await store().begin(user, key, 'h', T0, 'gen-1');
      await store().finish(user, key, 'gen-1');
      await store().abandon(user, key, 'gen-1');
      expect(await store().begin(user, key, 'h', T0 + 1, 'gen-1')).toMatchObject({ state: 'done', generationId: 'gen-1' });
    });

    it("does not let one user's abandon touch another's key", async () => {
      const key = uid('key');
      const alice = uid('alice');
      await store().begin(alice, key, 'h', T0, 'gen-1');
      await store().abandon(uid('bob'), key, 'gen-1');
      expect((await store().begin(alice, key, 'h', T0, 'gen-1')).state).toBe('in_progress');
    });

    it('finishes only with the generation the record names, and never changes a finished record', async () => {
      const user = uid('user');
      const key = uid('key');
      await store().begin(user, key, 'h', T0, 'gen-1');
      expect(await store().finish(user, key, 'gen-other')).toBe(false);
      expect((await store().begin(user, key, 'h', T0 + 1, 'gen-9')).state).toBe('in_progress');
      expect(await store().finish(user, key, 'gen-1')).toBe(true);
      expect(await store().finish(user, key, 'gen-1')).toBe(true); // a retry of the same finish
      expect(await store().finish(user, key, 'gen-other')).toBe(false);
      expect(await store().begin(user, key, 'h', T0 + 2, 'gen-9')).toEqual({ state: 'done', generationId: 'gen-1', requestHash: 'h' });
      expect(await store().finish(uid('user'), key, 'gen-1')).toBe(false);
    });

    it('lets one retry take over a stale in-progress record, naming its new generation', async () => {
      const user = uid('user');
      const key = uid('key');
      await store().begin(user, key, 'h', T0, 'gen-1');
      // Not stale yet: started at T0, and only records started before T0 are.
      expect(await store().takeOver(user, key, T0, T0 + 10, 'gen-2')).toBe(false);
      expect(await store().begin(user, key, 'h', T0 + 10, 'gen-x')).toMatchObject({ state: 'in_progress', generationId: 'gen-1', startedAt: T0 });
      expect(await store().takeOver(user, key, T0 + 1, T0 + 10, 'gen-2')).toBe(true);
      expect(await store().begin(user, key, 'h', T0 + 11, 'gen-x')).toEqual({ state: 'in_progress', requestHash: 'h', generationId: 'gen-2', startedAt: T0 + 10 });
      // The stalled first request can no longer finish it.
      expect(await store().finish(user, key, 'gen-1')).toBe(false);
      await store().abandon(user, key, 'gen-1');
      expect((await store().begin(user, key, 'h', T0 + 12, 'gen-x')).state).toBe('in_progress');
      expect(await store().finish(user, key, 'gen-2')).toBe(true);
      // Finished records, unknown keys and other users' keys are never taken over.
      expect(await store().takeOver(user, key, T0 + 1000, T0 + 1000, 'gen-3')).toBe(false);
      expect(await store().takeOver(user, uid('unknown'), T0 + 1000, T0 + 1000, 'gen-3')).toBe(false);
      const other = uid('key');
      await store().begin(user, other, 'h', T0, 'gen-o');
      expect(await store().takeOver(uid('bob'), other, T0 + 1000, T0 + 1000, 'gen-3')).toBe(false);
      expect(await store().begin(user, other, 'h', T0, 'gen-x')).toMatchObject({ generationId: 'gen-o', startedAt: T0 });
    });

    it('gives a stale record to exactly one of 20 concurrent takeovers', async () => {
      const user = uid('user');
      const key = uid('key');
      await store().begin(user, key, 'h', T0, 'gen-0');
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store().takeOver(user, key, T0 + 1, T0 + 100, `gen-${i + 1}`)));
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = `gen-${results.indexOf(true) + 1}`;
      expect(await store().begin(user, key, 'h', T0 + 101, 'gen-x')).toMatchObject({ state: 'in_progress', generationId: winner, startedAt: T0 + 100 });
    });

    it('keeps an abandon from forgetting a key another request took over', async () => {
      const user = uid('user');
      const key = uid('key');
      await store().begin(user, key, 'h', T0, 'gen-1');
      expect(await store().takeOver(user, key, T0 + 1, T0 + 5, 'gen-2')).toBe(true);
      await store().abandon(user, key, 'gen-1');
      expect(await store().begin(user, key, 'h', T0 + 6, 'gen-x')).toMatchObject({ state: 'in_progress', generationId: 'gen-2' });
      await store().abandon(user, key, 'gen-2');
      expect((await store().begin(user, key, 'h', T0 + 7, 'gen-3')).state).toBe('new');
    });

    it('purges records created before the time and counts them', async () => {
      const user = uid('user');
      const [k1, k2, k3, k4] = [uid('k'), uid('k'), uid('k'), uid('k')];
      await store().begin(user, k1, 'h', T0 - 100, 'gen-1');
      await store().begin(user, k2, 'h', T0 - 1, 'gen-2');
      await store().finish(user, k2, 'gen-2');
      await store().begin(user, k3, 'h', T0, 'gen-1');
      await store().begin(user, k4, 'h', T0 + 100, 'gen-1');
      expect(await store().purgeBefore(T0)).toBe(2);
      expect((await store().begin(user, k1, 'h', T0 + 200, 'gen-1')).state).toBe('new');
      expect((await store().begin(user, k2, 'h', T0 + 200, 'gen-1')).state).toBe('new');
      expect((await store().begin(user, k3, 'h', T0 + 200, 'gen-1')).state).toBe('in_progress');
      expect((await store().begin(user, k4, 'h', T0 + 200, 'gen-1')).state).toBe('in_progress');
      expect(await store().purgeBefore(T0)).toBe(0);
    });
  });
}
