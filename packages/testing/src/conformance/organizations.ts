import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { expectError } from './expect-error.js';
import type { User } from './fixture.js';
import type { Reply } from './http.js';
import { withHeld, type ModeContext } from './kit.js';

/**
 * Organisations over HTTP (issue 40): the admin routes, the organisation's budget and in-flight cap refusing a
 * member's create (402 / 429, nothing held), usage by member for an organisation admin, removal releasing nothing.
 */
export function defineOrganizationTests({ fx }: ModeContext): void {
  describe('organisations', () => {
    const admin = (path: string, method = 'GET', json?: unknown): Promise<Reply> =>
      fx.call(`/v1/admin${path}`, { method, headers: fx.adminAuth, ...(json !== undefined ? { json } : {}) });
    const orgId = (): string => `org-${randomBytes(6).toString('hex')}`;
    async function orgWith(limits: Record<string, unknown>, members: Array<{ user: User; role?: string }>): Promise<string> {
      const id = orgId();
      const created = await admin('/organizations', 'POST', { organizationId: id, ...limits });
      expect(created.status, created.text).toBe(201);
      for (const m of members) {
        const added = await admin(`/organizations/${id}/members`, 'POST', { userId: m.user.userId, ...(m.role ? { role: m.role } : {}) });
        expect(added.status, added.text).toBe(200);
      }
      return id;
    }

    it('creates, reads and changes an organisation through the admin routes, each answer a clear one', async () => {
      const [a, b] = [await fx.user(), await fx.user()];
      const id = orgId();
      const created = await admin('/organizations', 'POST', { organizationId: id, budget: { amount: 100, period: 'month' }, maxInFlight: 5, weight: 5 });
      expect(created.status, created.text).toBe(201);
      expect(created.body).toMatchObject({ organizationId: id, budget: { amount: 100, period: 'month' }, maxInFlight: 5, weight: 5, members: [], inFlight: 0, spent: 0, remaining: 100 });
      expect(created.headers.get('cache-control')).toBe('no-store');
      expectError(await admin('/organizations', 'POST', { organizationId: id }), 409, 'conflict');
      for (const bad of [{ organizationId: '' }, { organizationId: orgId(), weight: 0 }, { organizationId: orgId(), weight: 1.5 }, { organizationId: orgId(), budget: { amount: 1, period: 'week' } }, { organizationId: orgId(), extra: 1 }]) {
        expectError(await admin('/organizations', 'POST', bad), 400, 'invalid_request');
      }
      expect((await admin(`/organizations/${id}/members`, 'POST', { userId: a.userId, role: 'admin' })).body).toEqual({ organizationId: id, userId: a.userId, role: 'admin' });
      expect((await admin(`/organizations/${id}/members`, 'POST', { userId: b.userId })).status).toBe(200);
      const read = await admin(`/organizations/${encodeURIComponent(id)}`);
      expect(read.status).toBe(200);
      // Oldest first; two joined in the same millisecond are in user id order.
      const members = read.body.members as Array<{ userId: string; role: string; joinedAt: string }>;
      const joinedTogether = members[0]?.joinedAt === members[1]?.joinedAt;
      expect(members.map((m) => [m.userId, m.role])).toEqual(
        joinedTogether && b.userId < a.userId
          ? [[b.userId, 'member'], [a.userId, 'admin']]
          : [[a.userId, 'admin'], [b.userId, 'member']],
      );
      // One organisation per user; an unknown organisation is a 404 on every route.
      const other = await orgWith({}, []);
      expectError(await admin(`/organizations/${other}/members`, 'POST', { userId: a.userId }), 409, 'conflict');
      expectError(await admin(`/organizations/${orgId()}`), 404, 'not_found');
      expectError(await admin(`/organizations/${orgId()}/members`, 'POST', { userId: a.userId }), 404, 'not_found');
      expectError(await admin(`/organizations/${id}/members/${encodeURIComponent('nobody')}`, 'DELETE'), 404, 'not_found');
      // A user's key is not an admin key.
      expectError(await fx.call('/v1/admin/organizations', { method: 'POST', headers: a.auth, json: { organizationId: orgId() } }), 401, 'unauthorized');
      const audit = await admin('/audit?limit=20');
      const actions = (audit.body.data as Array<{ action: string; actor: string; details?: { organizationId?: string } }>).filter((e) => e.details?.organizationId === id);
      expect(actions.map((e) => e.action).sort()).toEqual(['organization.create', 'organization.member.add', 'organization.member.add']);
      expect(actions.every((e) => e.actor === 'conformance')).toBe(true);
    });

    it('refuses a member\u2019s create past the organisation\u2019s budget (402, nothing held), however many race', async () => {
      const users = [await fx.user(1000), await fx.user(1000)];
      const id = await orgWith({ budget: { amount: 25, period: 'day' } }, users.map((user) => ({ user })));
      const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => fx.create(users[i % 2]!, { modelId: 'image' })));
      expect(replies.filter((r) => r.status === 201)).toHaveLength(5);
      const refused = replies.filter((r) => r.status !== 201);
      expect(refused).toHaveLength(7);
      for (const r of refused) {
        expectError(r, 402, 'budget_exceeded');
        expect(r.body.error.message).toMatch(/organisation's daily budget of 25 tokens/);
      }
      for (const r of replies.filter((x) => x.status === 201)) await fx.terminal(users[replies.indexOf(r) % 2]!, r.body.generationId);
      expect((await fx.balance(users[0]!)) + (await fx.balance(users[1]!))).toBe(2000 - 25);
      expect((await admin(`/organizations/${id}`)).body).toMatchObject({ inFlight: 0, spent: 25, remaining: 0 });
    });

    it('answers 429 with Retry-After at the organisation\u2019s in-flight cap, and a slot frees when one finishes', async () => {
      const [a, b] = [await fx.user(), await fx.user()];
      const id = await orgWith({ maxInFlight: 1 }, [{ user: a }, { user: b }]);
      const ids: string[] = [];
      await withHeld(fx, a, ids, async () => {
        const before = fx.gate.total;
        const first = await fx.create(a, { modelId: 'held' });
        expect(first.status, first.text).toBe(201);
        ids.push(first.body.generationId);
        await fx.gate.reached(before + 1);
        const second = await fx.create(b, { modelId: 'noop' });
        expectError(second, 429, 'rate_limited');
        expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(await fx.balance(b)).toBe(1000);
        expect((await admin(`/organizations/${id}`)).body.inFlight).toBe(1);
      });
      const after = await fx.create(b, { modelId: 'noop' });
      expect(after.status, after.text).toBe(201);
      await fx.terminal(b, after.body.generationId);
    });

    it('changes an organisation\u2019s limits with PATCH: only the fields given, null removes one, the next create is held to them', async () => {
      const [a, b] = [await fx.user(), await fx.user()];
      const id = await orgWith({ budget: { amount: 100, period: 'month' }, maxInFlight: 1, weight: 5 }, [{ user: a }, { user: b }]);
      const ids: string[] = [];
      await withHeld(fx, a, ids, async () => {
        const before = fx.gate.total;
        const first = await fx.create(a, { modelId: 'held' });
        expect(first.status, first.text).toBe(201);
        ids.push(first.body.generationId);
        await fx.gate.reached(before + 1);
        expectError(await fx.create(b, { modelId: 'noop' }), 429, 'rate_limited');
        const raised = await admin(`/organizations/${id}`, 'PATCH', { maxInFlight: 2 });
        expect(raised.status, raised.text).toBe(200);
        // Only the cap changed; what is held stays held.
        expect(raised.body).toMatchObject({ organizationId: id, budget: { amount: 100, period: 'month' }, maxInFlight: 2, weight: 5, inFlight: 1 });
        expect(raised.headers.get('cache-control')).toBe('no-store');
        const next = await fx.create(b, { modelId: 'noop' });
        expect(next.status, next.text).toBe(201);
        await fx.terminal(b, next.body.generationId);
      });
      // A budget below what is spent refuses the next create (402); null removes it and the cap; the weight changes alone.
      const spent = (await admin(`/organizations/${id}`)).body.spent as number;
      expect((await admin(`/organizations/${id}`, 'PATCH', { budget: { amount: spent, period: 'month' } })).body).toMatchObject({ remaining: 0 });
      expectError(await fx.create(b, { modelId: 'image' }), 402, 'budget_exceeded');
      const cleared = await admin(`/organizations/${id}`, 'PATCH', { budget: null, maxInFlight: null, weight: 2 });
      expect(cleared.status, cleared.text).toBe(200);
      expect(cleared.body).toMatchObject({ organizationId: id, weight: 2, inFlight: 0 });
      for (const field of ['budget', 'maxInFlight', 'spent', 'remaining', 'resetsAt']) expect(cleared.body).not.toHaveProperty(field);
      const free = await fx.create(b, { modelId: 'image' });
      expect(free.status, free.text).toBe(201);
      await fx.terminal(b, free.body.generationId);
      // Bad bodies are a 400 naming the field, changing nothing; an unknown organisation is a 404; a user's key is not an admin's.
      for (const bad of [{ weight: 0 }, { weight: null }, { maxInFlight: 0 }, { budget: { amount: -1, period: 'day' } }, { budget: { amount: 1, period: 'week' } }, { extra: 1 }]) {
        expectError(await admin(`/organizations/${id}`, 'PATCH', bad), 400, 'invalid_request');
      }
      expect((await admin(`/organizations/${id}`)).body).toMatchObject({ weight: 2 });
      expectError(await admin(`/organizations/${orgId()}`, 'PATCH', { weight: 3 }), 404, 'not_found');
      expectError(await fx.call(`/v1/admin/organizations/${id}`, { method: 'PATCH', headers: a.auth, json: { weight: 9 } }), 401, 'unauthorized');
      const audit = await admin('/audit?limit=50');
      const changes = (audit.body.data as Array<{ action: string; details?: Record<string, unknown> }>).filter((e) => e.action === 'organization.limits.set' && e.details?.organizationId === id);
      expect(changes.map((e) => e.details)).toEqual([
        { organizationId: id, budget: null, maxInFlight: null, weight: 2 },
        { organizationId: id, budget: { amount: spent, period: 'month' }, maxInFlight: 2, weight: 5 },
        { organizationId: id, budget: { amount: 100, period: 'month' }, maxInFlight: 2, weight: 5 },
      ]);
    });

    it('shows usage by member to an organisation admin only, and to the admin API', async () => {
      const [boss, worker, outsider] = [await fx.user(), await fx.user(), await fx.user()];
      const id = await orgWith({}, [{ user: boss, role: 'admin' }, { user: worker }]);
      for (const user of [boss, worker, worker]) {
        const r = await fx.create(user, { modelId: 'image' });
        await fx.terminal(user, r.body.generationId);
      }
      const mine = await fx.call('/v1/usage?groupBy=member', { headers: boss.auth });
      expect(mine.status, mine.text).toBe(200);
      expect(mine.body).toEqual({
        data: [
          { userId: worker.userId, count: 2, tokens: 10 },
          { userId: boss.userId, count: 1, tokens: 5 },
        ],
        total: { count: 3, tokens: 15 },
      });
      expectError(await fx.call('/v1/usage?groupBy=member', { headers: worker.auth }), 403, 'forbidden');
      expectError(await fx.call('/v1/usage?groupBy=member', { headers: outsider.auth }), 403, 'forbidden');
      const byAdmin = await admin(`/organizations/${id}/usage?groupBy=member`);
      expect(byAdmin.body).toEqual(mine.body);
      const byDay = await admin(`/organizations/${id}/usage`);
      expect(byDay.body.total).toEqual({ count: 3, tokens: 15 });
      expectError(await admin(`/organizations/${id}/usage?groupBy=model`), 400, 'invalid_request');
    });

    it('removing a member releases nothing: its running generation stays reserved and settles under the organisation', async () => {
      const [a, b] = [await fx.user(100), await fx.user(100)];
      const id = await orgWith({ budget: { amount: 50, period: 'total' }, maxInFlight: 3 }, [{ user: a }, { user: b }]);
      const ids: string[] = [];
      await withHeld(fx, a, ids, async () => {
        const before = fx.gate.total;
        const held = await fx.create(a, { modelId: 'held' });
        ids.push(held.body.generationId);
        await fx.gate.reached(before + 1);
        const removed = await admin(`/organizations/${id}/members/${encodeURIComponent(a.userId)}`, 'DELETE');
        expect(removed.status).toBe(204);
        expectError(await admin(`/organizations/${id}/members/${encodeURIComponent(a.userId)}`, 'DELETE'), 404, 'not_found');
        expect(await fx.balance(a)).toBe(96);
        expect(await fx.balance(b)).toBe(100);
        expect((await admin(`/organizations/${id}`)).body).toMatchObject({ inFlight: 1, spent: 4, members: [{ userId: b.userId }] });
      });
      expect((await admin(`/organizations/${id}`)).body).toMatchObject({ inFlight: 0, spent: 4 });
      expect(await fx.balance(a)).toBe(96);
    });
  });
}
