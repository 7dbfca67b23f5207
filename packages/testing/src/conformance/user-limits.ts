import { describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import type { Reply } from './http.js';
import { withHeld, type ModeContext } from './kit.js';

/**
 * A user's own limits over HTTP (issue 40): `PATCH` / `GET /v1/admin/users/{userId}/limits`, the user's budget and
 * in-flight cap refusing its creates (402 / 429, nothing held).
 */
export function defineUserLimitTests({ fx }: ModeContext): void {
  describe('user limits', () => {
    const admin = (path: string, method = 'GET', json?: unknown): Promise<Reply> =>
      fx.call(`/v1/admin${path}`, { method, headers: fx.adminAuth, ...(json !== undefined ? { json } : {}) });
    const limits = (userId: string): string => `/users/${encodeURIComponent(userId)}/limits`;

    it('sets, reads and clears a user\u2019s limits through the admin routes, each answer a clear one, each change audited', async () => {
      const a = await fx.user();
      expect((await admin(limits(a.userId))).body).toEqual({ userId: a.userId, inFlight: 0 });
      const set = await admin(limits(a.userId), 'PATCH', { budget: { amount: 40, period: 'month' }, maxInFlight: 3 });
      expect(set.status, set.text).toBe(200);
      expect(set.headers.get('cache-control')).toBe('no-store');
      expect(set.body).toMatchObject({ userId: a.userId, budget: { amount: 40, period: 'month' }, maxInFlight: 3, inFlight: 0, spent: 0, remaining: 40 });
      expect(set.body.resetsAt).toMatch(/-01T00:00:00.000Z$/);
      const merged = await admin(limits(a.userId), 'PATCH', { maxInFlight: null });
      expect(merged.body).toEqual({ userId: a.userId, budget: { amount: 40, period: 'month' }, inFlight: 0, spent: 0, remaining: 40, resetsAt: set.body.resetsAt });
      for (const bad of [{ maxInFlight: 0 }, { maxInFlight: 1.5 }, { budget: { amount: 1, period: 'week' } }, { budget: { amount: 0, period: 'day' } }, { extra: 1 }]) {
        expectError(await admin(limits(a.userId), 'PATCH', bad), 400, 'invalid_request');
      }
      expectError(await fx.call(`/v1/admin${limits(a.userId)}`, { method: 'PATCH', headers: a.auth, json: { maxInFlight: 1 } }), 401, 'unauthorized');
      expect((await admin(limits(a.userId), 'PATCH', { budget: null })).body).toEqual({ userId: a.userId, inFlight: 0 });
      const audit = await admin('/audit?limit=50');
      const mine = (audit.body.data as Array<{ action: string; actor: string; userId?: string }>).filter((e) => e.userId === a.userId && e.action === 'user.limits.set');
      expect(mine).toHaveLength(3);
      expect(mine.every((e) => e.actor === 'conformance')).toBe(true);
    });

    it('refuses a create past the user\u2019s own budget (402 naming it, nothing held), however many race', async () => {
      const user = await fx.user(1000);
      await admin(limits(user.userId), 'PATCH', { budget: { amount: 12, period: 'day' } });
      const replies = await Promise.all(Array.from({ length: 8 }, () => fx.create(user, { modelId: 'image' })));
      const created = replies.filter((r) => r.status === 201);
      expect(created).toHaveLength(2);
      for (const r of replies.filter((x) => x.status !== 201)) {
        expectError(r, 402, 'budget_exceeded');
        expect(r.body.error.message).toMatch(/^Your user account's daily budget of 12 tokens would be exceeded .*; it resets at /);
      }
      for (const r of created) await fx.terminal(user, r.body.generationId);
      expect(await fx.balance(user)).toBe(1000 - 10);
      expect((await admin(limits(user.userId))).body).toMatchObject({ inFlight: 0, spent: 10, remaining: 2 });
    });

    it('answers 429 with Retry-After at the user\u2019s own cap, and a slot frees when one finishes', async () => {
      const a = await fx.user();
      await admin(limits(a.userId), 'PATCH', { maxInFlight: 1 });
      const ids: string[] = [];
      await withHeld(fx, a, ids, async () => {
        const before = fx.gate.total;
        const first = await fx.create(a, { modelId: 'held' });
        expect(first.status, first.text).toBe(201);
        ids.push(first.body.generationId);
        await fx.gate.reached(before + 1);
        const balance = await fx.balance(a);
        const second = await fx.create(a, { modelId: 'noop' });
        expectError(second, 429, 'rate_limited');
        expect(second.body.error.message).toBe('Your user account has 1 generation pending or processing; wait for one to finish.');
        expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(await fx.balance(a)).toBe(balance);
        expect((await admin(limits(a.userId))).body.inFlight).toBe(1);
      });
      const after = await fx.create(a, { modelId: 'noop' });
      expect(after.status, after.text).toBe(201);
      await fx.terminal(a, after.body.generationId);
    });
  });
}
