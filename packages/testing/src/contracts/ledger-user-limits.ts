import { describe, expect, it } from 'vitest';
import type { AccountSnapshot, BudgetWindows, Ledger, OrganizationLedger, ReserveOutcome, ReserveResult, UserLimitLedger } from '@genservice/core/ports';
import { uid } from './harness.js';

const W0 = Date.UTC(2026, 0, 10);
const WINDOWS: BudgetWindows = { day: W0, month: Date.UTC(2026, 0, 1) };
const NEXT_DAY: BudgetWindows = { day: W0 + 86_400_000, month: Date.UTC(2026, 0, 1) };

function resultOf(answer: ReserveResult | ReserveOutcome): ReserveResult {
  return typeof answer === 'string' ? answer : answer.result;
}

function outcomeOf(answer: ReserveResult | ReserveOutcome): ReserveOutcome {
  if (typeof answer !== 'string') return answer;
  return answer === 'ok' ? { result: 'ok' } : { result: answer, refusedBy: answer === 'insufficient' ? 'user' : 'key' };
}

/**
 * The user-limit half of the Ledger contract (issue 40): a user's own budget and in-flight cap held with the balance,
 * the key and the organisation in one atomic step. Runs when the ledger keeps them (the `UserLimitLedger` methods).
 */
export function describeUserLimitLedger(
  ledger: () => Ledger,
  userWith: (balance: number) => Promise<string>,
  expectAccount: (user: string, expected: AccountSnapshot) => Promise<void>,
): void {
  describe('user limits', () => {
    const l = (): Ledger & UserLimitLedger => ledger() as Ledger & UserLimitLedger;
    const keeps = (): boolean => typeof ledger().setUserLimits === 'function';

    it('sets, replaces and clears a user\u2019s limits; none were set reads null', async () => {
      if (!keeps()) return;
      const user = await userWith(10);
      expect(await l().userLimits(user, WINDOWS)).toBeNull();
      await l().setUserLimits(user, { budget: { amount: 50, period: 'month' }, maxInFlight: 4 });
      expect(await l().userLimits(user, WINDOWS)).toEqual({ limits: { budget: { amount: 50, period: 'month' }, maxInFlight: 4 }, inFlight: 0, spent: 0 });
      await l().setUserLimits(user, { maxInFlight: 2 });
      expect(await l().userLimits(user, WINDOWS)).toEqual({ limits: { maxInFlight: 2 }, inFlight: 0, spent: 0 });
      await l().setUserLimits(user, {});
      expect(await l().userLimits(user, WINDOWS)).toEqual({ limits: {}, inFlight: 0, spent: 0 });
      // Without limits the reserve holds nothing of them (and answers no refusal of them).
      expect(resultOf(await l().reserve(user, uid('gen'), 10, W0, { windows: WINDOWS }))).toBe('ok');
    });

    it('lets exactly 3 of 30 racing reserves of 3 through a user budget of 10, holding nothing for the rest', async () => {
      if (!keeps()) return;
      const user = await userWith(100);
      await l().setUserLimits(user, { budget: { amount: 10, period: 'day' } });
      const answers = await Promise.all(Array.from({ length: 30 }, () => l().reserve(user, uid('gen'), 3, W0 + 5, { modelId: 'm', windows: WINDOWS })));
      expect(answers.filter((a) => resultOf(a) === 'ok')).toHaveLength(3);
      const refused = answers.filter((a) => resultOf(a) !== 'ok');
      expect(refused).toHaveLength(27);
      for (const a of refused) expect(a).toMatchObject({ result: 'budget_exceeded', refusedBy: 'user', userLimits: { budget: { amount: 10, period: 'day' } } });
      expect(await l().userLimits(user, WINDOWS)).toMatchObject({ inFlight: 3, spent: 9 });
      await expectAccount(user, { balance: 91, reserved: 9, settled: 0 });
      // The next day is a new window.
      expect(resultOf(await l().reserve(user, uid('gen'), 3, W0 + 86_400_000, { windows: NEXT_DAY }))).toBe('ok');
    });

    it('caps the user in flight: exactly 2 of 10 racing reserves, a settle frees a slot and gives back the unspent part', async () => {
      if (!keeps()) return;
      const user = await userWith(100);
      await l().setUserLimits(user, { maxInFlight: 2, budget: { amount: 50, period: 'total' } });
      const ids = Array.from({ length: 10 }, () => uid('gen'));
      const answers = await Promise.all(ids.map((id) => l().reserve(user, id, 4, W0, { windows: WINDOWS })));
      const ok = ids.filter((_, i) => resultOf(answers[i]!) === 'ok');
      expect(ok).toHaveLength(2);
      expect(answers.filter((a) => resultOf(a) === 'limit_reached')).toHaveLength(8);
      for (const a of answers) expect(a).toMatchObject({ userLimits: { maxInFlight: 2 } });
      await expectAccount(user, { balance: 92, reserved: 8, settled: 0 });
      expect(await l().settle(ok[0]!, 1, W0)).toBe(1);
      expect(await l().settle(ok[0]!, 1, W0)).toBe(1);
      expect(await l().userLimits(user, NEXT_DAY)).toMatchObject({ inFlight: 1, spent: 5 });
      expect(resultOf(await l().reserve(user, uid('gen'), 1, W0, { windows: WINDOWS }))).toBe('ok');
      // A batch counts each of its reserves, and is refused whole when they do not all fit.
      expect(await l().reserveMany(user, [{ generationId: uid('gen'), amount: 1 }], W0, { windows: WINDOWS })).toMatchObject({ result: 'limit_reached', refusedBy: 'user' });
      await expectAccount(user, { balance: 94, reserved: 5, settled: 1 });
    });

    it('counts from when the limits were set: a reserve open before settles without giving back to them', async () => {
      if (!keeps()) return;
      const user = await userWith(100);
      const before = uid('gen');
      expect(resultOf(await l().reserve(user, before, 7, W0, { windows: WINDOWS }))).toBe('ok');
      await l().setUserLimits(user, { maxInFlight: 1, budget: { amount: 5, period: 'day' } });
      const after = uid('gen');
      expect(resultOf(await l().reserve(user, after, 5, W0, { windows: WINDOWS }))).toBe('ok');
      expect(await l().settle(before, 7, W0)).toBe(7);
      expect(await l().userLimits(user, WINDOWS)).toMatchObject({ inFlight: 1, spent: 5 });
      expect(await l().release(after, W0)).toBe(0);
      expect(await l().userLimits(user, WINDOWS)).toMatchObject({ inFlight: 0, spent: 0 });
    });

    it('holds nothing at any level when one refuses, organisation, user and key together; racing reserves keep every level exact', async () => {
      if (!keeps()) return;
      const orgs = ledger() as Ledger & Partial<OrganizationLedger>;
      const user = await userWith(1000);
      const other = await userWith(1000);
      let org: string | undefined;
      if (typeof orgs.createOrganization === 'function') {
        org = uid('org');
        await orgs.createOrganization({ organizationId: org, weight: 1, createdAt: W0, budget: { amount: 40, period: 'month' }, maxInFlight: 20 });
        await orgs.addMember!(org, { userId: user, role: 'member', joinedAt: W0 });
        await orgs.addMember!(org, { userId: other, role: 'member', joinedAt: W0 });
      }
      await l().setUserLimits(user, { budget: { amount: 15, period: 'day' }, maxInFlight: 4 });
      const key = uid('key');
      const keyLimit = { amount: 9, windowStart: W0 };
      const withKey = (amount: number) => l().reserve(user, uid('gen'), amount, W0, { keyId: key, keyLimit, windows: WINDOWS });
      expect(outcomeOf(await withKey(10))).toMatchObject({ result: 'budget_exceeded', refusedBy: 'key' });
      expect(await l().reserve(user, uid('gen'), 16, W0, { windows: WINDOWS })).toMatchObject({ result: 'budget_exceeded', refusedBy: 'user' });
      await expectAccount(user, { balance: 1000, reserved: 0, settled: 0 });
      // 40 racing reserves of 2 by the user (half with the key) and 16 of 2 by another member: the user's cap and the
      // organisation's cap and budget (4 + 16 in flight, 8 + 32 tokens) are all reached exactly.
      const answers = await Promise.all([
        ...Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? withKey(2) : l().reserve(user, uid('gen'), 2, W0, { windows: WINDOWS }))),
        ...Array.from({ length: 16 }, () => l().reserve(other, uid('gen'), 2, W0, { windows: WINDOWS })),
      ]);
      const mine = answers.slice(0, 40).filter((a) => resultOf(a) === 'ok').length;
      const theirs = answers.slice(40).filter((a) => resultOf(a) === 'ok').length;
      expect(mine).toBe(4);
      const state = (await l().userLimits(user, WINDOWS))!;
      expect(state).toMatchObject({ inFlight: 4, spent: 8 });
      expect(await l().keySpend(key, W0)).toBeLessThanOrEqual(8);
      await expectAccount(user, { balance: 992, reserved: 8, settled: 0 });
      expect(theirs).toBe(16);
      if (org) {
        expect((await orgs.organization!(org, WINDOWS))!).toMatchObject({ inFlight: 20, spent: 40 });
        // Now the organisation refuses the other member, and the user (at its own cap too) holds nothing more.
        expect(await l().reserve(other, uid('gen'), 1, W0, { windows: WINDOWS })).toMatchObject({ result: 'limit_reached', refusedBy: 'organization' });
      }
      expect(await l().userLimits(other, WINDOWS)).toBeNull();
    });
  });
}
