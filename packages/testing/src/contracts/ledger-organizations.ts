import { describe, expect, it } from 'vitest';
import type { AccountSnapshot, BudgetWindows, Ledger, OrganizationLedger, OrganizationRecord, ReserveOutcome, ReserveResult } from '@genservice/core/ports';
import { uid } from './harness.js';

const W0 = Date.UTC(2026, 0, 10);
const WINDOWS: BudgetWindows = { day: W0, month: Date.UTC(2026, 0, 1) };
const NEXT_DAY: BudgetWindows = { day: W0 + 86_400_000, month: Date.UTC(2026, 0, 1) };

/** The result alone, whether the ledger answered a plain result or an outcome. */
function resultOf(answer: ReserveResult | ReserveOutcome): ReserveResult {
  return typeof answer === 'string' ? answer : answer.result;
}

/** An outcome, whether the ledger answered one or a plain result (which a refusal by the balance or the key may be). */
function outcomeOf(answer: ReserveResult | ReserveOutcome): ReserveOutcome {
  if (typeof answer !== 'string') return answer;
  return answer === 'ok' ? { result: 'ok' } : { result: answer, refusedBy: answer === 'insufficient' ? 'user' : 'key' };
}

/**
 * The organisation half of the Ledger contract (issue 40): membership, and the organisation's budget and in-flight cap
 * held with the balance and the key in one atomic step. Runs when the ledger keeps organisations (all the
 * `OrganizationLedger` methods); a host's ledger without them skips it.
 */
export function describeOrganizationLedger(
  ledger: () => Ledger,
  userWith: (balance: number) => Promise<string>,
  expectAccount: (user: string, expected: AccountSnapshot) => Promise<void>,
): void {
  describe('organisations', () => {
    const orgs = (): Ledger & OrganizationLedger => {
      const l = ledger();
      if (typeof l.createOrganization !== 'function') throw new Error('unreachable: checked by keepsOrganizations');
      return l as Ledger & OrganizationLedger;
    };
    const keepsOrganizations = (): boolean => typeof ledger().createOrganization === 'function';

    async function orgWith(limits: Partial<Omit<OrganizationRecord, 'organizationId' | 'createdAt'>>, members: string[]): Promise<string> {
      const organizationId = uid('org');
      expect(await orgs().createOrganization({ organizationId, weight: 1, createdAt: W0, ...limits })).toBe(true);
      for (const [i, userId] of members.entries()) {
        expect(await orgs().addMember(organizationId, { userId, role: i === 0 ? 'admin' : 'member', joinedAt: W0 + i })).toBe('added');
      }
      return organizationId;
    }

    it('creates an organisation once, and keeps one organisation per user', async () => {
      if (!keepsOrganizations()) return;
      const [a, b] = [await userWith(10), await userWith(10)];
      const org = await orgWith({ budget: { amount: 50, period: 'month' }, maxInFlight: 4, weight: 5 }, [a]);
      expect(await orgs().createOrganization({ organizationId: org, weight: 2, createdAt: W0 })).toBe(false);
      const other = await orgWith({}, []);
      expect(await orgs().addMember(other, { userId: a, role: 'member', joinedAt: W0 })).toBe('member_elsewhere');
      expect(await orgs().addMember(uid('org'), { userId: b, role: 'member', joinedAt: W0 })).toBe('no_organization');
      expect(await orgs().addMember(org, { userId: b, role: 'member', joinedAt: W0 + 5 })).toBe('added');
      expect(await orgs().membership(a)).toEqual({ organizationId: org, role: 'admin' });
      expect(await orgs().membership(uid('user'))).toBeNull();
      const state = await orgs().organization(org, WINDOWS);
      expect(state).toEqual({
        organization: { organizationId: org, budget: { amount: 50, period: 'month' }, maxInFlight: 4, weight: 5, createdAt: W0 },
        members: [
          { userId: a, role: 'admin', joinedAt: W0 },
          { userId: b, role: 'member', joinedAt: W0 + 5 },
        ],
        inFlight: 0,
        spent: 0,
      });
      expect(await orgs().organization(uid('org'), WINDOWS)).toBeNull();
      expect(await orgs().removeMember(org, b)).toBe(true);
      expect(await orgs().removeMember(org, b)).toBe(false);
      expect(await orgs().removeMember(other, a)).toBe(false);
      expect(await orgs().membership(b)).toBeNull();
      expect(await orgs().addMember(other, { userId: b, role: 'member', joinedAt: W0 })).toBe('added');
    });

    it('changes an organisation\u2019s limits in place: the next reserve is held to them, what is held stays held', async () => {
      if (!keepsOrganizations()) return;
      const [a, b] = [await userWith(100), await userWith(100)];
      const org = await orgWith({ budget: { amount: 10, period: 'month' }, maxInFlight: 1, weight: 5 }, [a, b]);
      const first = uid('gen');
      expect(resultOf(await orgs().reserve(a, first, 4, W0, { windows: WINDOWS }))).toBe('ok');
      expect(await orgs().reserve(b, uid('gen'), 1, W0, { windows: WINDOWS })).toMatchObject({ result: 'limit_reached', refusedBy: 'organization' });
      // A higher cap and a lower budget: the held reserve counts against both.
      expect(await orgs().setOrganizationLimits(org, { budget: { amount: 6, period: 'month' }, maxInFlight: 3, weight: 2 })).toBe(true);
      expect(await orgs().organization(org, WINDOWS)).toMatchObject({
        organization: { organizationId: org, budget: { amount: 6, period: 'month' }, maxInFlight: 3, weight: 2, createdAt: W0 },
        inFlight: 1,
        spent: 4,
      });
      expect(await orgs().reserve(b, uid('gen'), 3, W0, { windows: WINDOWS })).toMatchObject({ result: 'budget_exceeded', refusedBy: 'organization' });
      expect(resultOf(await orgs().reserve(b, uid('gen'), 2, W0, { windows: WINDOWS }))).toBe('ok');
      // Both removed: only the balance holds; the settle of a reserve made under the old limits gives back as before.
      expect(await orgs().setOrganizationLimits(org, { weight: 1 })).toBe(true);
      const state = await orgs().organization(org, WINDOWS);
      expect(state?.organization).toEqual({ organizationId: org, weight: 1, createdAt: W0 });
      for (let i = 0; i < 3; i++) expect(resultOf(await orgs().reserve(b, uid('gen'), 10, W0, { windows: WINDOWS }))).toBe('ok');
      expect(await orgs().settle(first, 1, W0)).toBe(1);
      expect((await orgs().organization(org, WINDOWS))?.inFlight).toBe(4);
      expect(await orgs().setOrganizationLimits(uid('org'), { weight: 3 })).toBe(false);
    });

    it('lets exactly 3 of 40 racing reserves of 3 from four members through an organisation budget of 10, holding nothing for the rest', async () => {
      if (!keepsOrganizations()) return;
      const users = await Promise.all(Array.from({ length: 4 }, () => userWith(100)));
      const org = await orgWith({ budget: { amount: 10, period: 'day' } }, users);
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) => orgs().reserve(users[i % 4]!, uid('gen'), 3, W0 + 5, { modelId: 'm', windows: WINDOWS })),
      );
      expect(answers.filter((a) => resultOf(a) === 'ok')).toHaveLength(3);
      const refused = answers.filter((a) => resultOf(a) !== 'ok');
      expect(refused).toHaveLength(37);
      for (const a of refused) expect(a).toMatchObject({ result: 'budget_exceeded', refusedBy: 'organization', organization: { organizationId: org } });
      expect((await orgs().organization(org, WINDOWS))!).toMatchObject({ inFlight: 3, spent: 9 });
      let reserved = 0;
      for (const user of users) reserved += (await orgs().account(user)).reserved;
      expect(reserved).toBe(9);
      // The next day is a new window; a `total` budget would not be.
      expect(resultOf(await orgs().reserve(users[0]!, uid('gen'), 3, W0 + 86_400_000, { windows: NEXT_DAY }))).toBe('ok');
    });

    it('caps the organisation in flight: exactly 2 of 10 racing reserves, and a settle frees a slot', async () => {
      if (!keepsOrganizations()) return;
      const users = [await userWith(100), await userWith(100)];
      const org = await orgWith({ maxInFlight: 2, weight: 3 }, users);
      const ids = Array.from({ length: 10 }, () => uid('gen'));
      const answers = await Promise.all(ids.map((id, i) => orgs().reserve(users[i % 2]!, id, 1, W0, { windows: WINDOWS })));
      const ok = ids.filter((_, i) => resultOf(answers[i]!) === 'ok');
      expect(ok).toHaveLength(2);
      for (const a of answers) expect(a).toMatchObject({ organization: { organizationId: org, weight: 3, maxInFlight: 2 } });
      expect(answers.filter((a) => resultOf(a) === 'limit_reached')).toHaveLength(8);
      expect((await orgs().account(users[0]!)).reserved + (await orgs().account(users[1]!)).reserved).toBe(2);
      expect(await orgs().settle(ok[0]!, 1, W0)).toBe(1);
      expect((await orgs().organization(org, WINDOWS))!.inFlight).toBe(1);
      expect(resultOf(await orgs().reserve(users[0]!, uid('gen'), 1, W0, { windows: WINDOWS }))).toBe('ok');
      // A batch counts each of its reserves, and is refused whole when they do not all fit.
      expect(resultOf(await orgs().reserveMany(users[1]!, [{ generationId: uid('gen'), amount: 1 }], W0, { windows: WINDOWS }))).toBe('limit_reached');
    });

    it('holds nothing at any level when one level refuses: balance, key, organisation budget, organisation cap', async () => {
      if (!keepsOrganizations()) return;
      const user = await userWith(20);
      const org = await orgWith({ budget: { amount: 12, period: 'total' }, maxInFlight: 3 }, [user]);
      const key = uid('key');
      const keyLimit = { amount: 10, windowStart: W0 };
      const at = (amount: number) => orgs().reserve(user, uid('gen'), amount, W0, { keyId: key, keyLimit, windows: WINDOWS });
      expect(outcomeOf(await at(21))).toMatchObject({ result: 'insufficient', refusedBy: 'user' });
      expect(outcomeOf(await at(11))).toMatchObject({ result: 'budget_exceeded', refusedBy: 'key' });
      expect(resultOf(await at(8))).toBe('ok');
      expect(await orgs().reserve(user, uid('gen'), 5, W0, { windows: WINDOWS })).toMatchObject({ result: 'budget_exceeded', refusedBy: 'organization' });
      await expectAccount(user, { balance: 12, reserved: 8, settled: 0 });
      expect(await orgs().keySpend(key, W0)).toBe(8);
      expect((await orgs().organization(org, WINDOWS))!).toMatchObject({ inFlight: 1, spent: 8 });
      expect(resultOf(await at(1))).toBe('ok');
      expect(resultOf(await at(1))).toBe('ok');
      expect(await orgs().reserve(user, uid('gen'), 1, W0, { windows: WINDOWS })).toMatchObject({ result: 'limit_reached', refusedBy: 'organization' });
      await expectAccount(user, { balance: 10, reserved: 10, settled: 0 });
      expect(await orgs().keySpend(key, W0)).toBe(10);
      expect((await orgs().organization(org, NEXT_DAY))!).toMatchObject({ inFlight: 3, spent: 10 });
    });

    it('never passes the organisation\u2019s budget or cap while its members\u2019 reserves, settles and releases race', async () => {
      if (!keepsOrganizations()) return;
      const users = await Promise.all(Array.from({ length: 3 }, () => userWith(10_000)));
      const org = await orgWith({ budget: { amount: 20, period: 'day' }, maxInFlight: 5 }, users);
      const held: string[] = [];
      const reserveOne = async (i: number): Promise<void> => {
        const gen = uid('gen');
        if (resultOf(await orgs().reserve(users[i % 3]!, gen, 3, W0, { windows: WINDOWS })) === 'ok') held.push(gen);
      };
      for (let round = 0; round < 6; round++) {
        const ends = held.splice(0, 3).map((gen, i) => (i % 2 === 0 ? orgs().release(gen, W0) : orgs().settle(gen, 1, W0)));
        await Promise.all([...Array.from({ length: 12 }, (_, i) => reserveOne(i)), ...ends]);
        const state = (await orgs().organization(org, WINDOWS))!;
        expect(state.spent).toBeLessThanOrEqual(20);
        expect(state.inFlight).toBeLessThanOrEqual(5);
        expect(state.inFlight).toBe(held.length);
      }
      let reserved = 0;
      let settled = 0;
      for (const user of users) {
        const a = await orgs().account(user);
        reserved += a.reserved;
        settled += a.settled;
      }
      expect((await orgs().organization(org, WINDOWS))!.spent).toBe(reserved + settled);
    });

    it('settles to the organisation a reserve was held under, even after its owner left; leaving releases nothing', async () => {
      if (!keepsOrganizations()) return;
      const [a, b] = [await userWith(100), await userWith(100)];
      const org = await orgWith({ budget: { amount: 20, period: 'day' }, maxInFlight: 5 }, [a, b]);
      const [ga, gb, gb2] = [uid('gen'), uid('gen'), uid('gen')];
      expect(resultOf(await orgs().reserve(a, ga, 6, W0, { modelId: 'm', windows: WINDOWS }))).toBe('ok');
      expect(resultOf(await orgs().reserve(b, gb, 5, W0, { modelId: 'm', windows: WINDOWS }))).toBe('ok');
      expect(await orgs().removeMember(org, b)).toBe(true);
      // b's open reserve is still b's and still the organisation's; a's is untouched.
      await expectAccount(b, { balance: 95, reserved: 5, settled: 0 });
      await expectAccount(a, { balance: 94, reserved: 6, settled: 0 });
      expect((await orgs().organization(org, WINDOWS))!).toMatchObject({ inFlight: 2, spent: 11 });
      // A reserve b makes now is b's alone: a plain answer or an outcome without an organisation.
      const alone = await orgs().reserve(b, gb2, 50, W0, { windows: WINDOWS });
      expect(resultOf(alone)).toBe('ok');
      if (typeof alone !== 'string') expect(alone.organization).toBeUndefined();
      expect((await orgs().organization(org, WINDOWS))!).toMatchObject({ inFlight: 2, spent: 11 });
      expect(await orgs().settle(gb, 2, W0 + 10)).toBe(2);
      expect(await orgs().release(ga, W0 + 20)).toBe(0);
      expect(await orgs().settle(gb2, 50, W0 + 30)).toBe(50);
      expect((await orgs().organization(org, WINDOWS))!).toMatchObject({ inFlight: 0, spent: 2 });
      await expectAccount(b, { balance: 48, reserved: 0, settled: 52 });
      const q = { from: '2026-01-10', to: '2026-01-10' };
      // a's release (a create undone: no generation was made) counts nothing.
      expect(await orgs().organizationUsage(org, { ...q, groupBy: 'member' })).toEqual({
        rows: [{ group: b, count: 1, tokens: 2 }],
        total: { count: 1, tokens: 2 },
      });
      expect(await orgs().organizationUsage(org, { ...q, groupBy: 'day' })).toEqual({
        rows: [{ group: '2026-01-10', count: 1, tokens: 2 }],
        total: { count: 1, tokens: 2 },
      });
      expect(await orgs().organizationUsage(org, { from: '2026-01-11', to: '2026-01-12', groupBy: 'day' })).toEqual({ rows: [], total: { count: 0, tokens: 0 } });
      // A user's own usage still counts all of it.
      expect((await orgs().usage(b, { ...q, groupBy: 'day' })).total).toEqual({ count: 2, tokens: 52 });
    });
  });
}
