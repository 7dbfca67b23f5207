import { describe, expect, it } from 'vitest';
import { MAX_TOKENS } from '@genservice/core';
import type { AccountSnapshot, Ledger, ReserveOutcome, ReserveResult } from '@genservice/core/ports';
import { describeOpenReserves } from './ledger-open-reserves.js';
import { describeOrganizationLedger } from './ledger-organizations.js';
import { describeUserLimitLedger } from './ledger-user-limits.js';
import { T0, settleAll, uid, useFresh } from './harness.js';

/** The Ledger half of `runPortContracts`. */
export function describeLedgerContract(make: () => Promise<{ ledger: Ledger; close(): Promise<void> }>): void {
  describe('Ledger', () => {
    const ports = useFresh(make);
    const ledger = (): Ledger => ports().ledger;

    async function userWith(balance: number): Promise<string> {
      const user = uid('user');
      if (balance > 0) await ledger().credit(user, balance);
      return user;
    }

    async function expectAccount(user: string, expected: AccountSnapshot): Promise<void> {
      expect(await ledger().account(user)).toEqual(expected);
      expect(await ledger().balance(user)).toBe(expected.balance);
    }

    it('shows an unknown user as an empty account that cannot reserve', async () => {
      const user = uid('nobody');
      await expectAccount(user, { balance: 0, reserved: 0, settled: 0 });
      expect(await ledger().reserve(user, uid('gen'), 1)).toBe('insufficient');
      await expectAccount(user, { balance: 0, reserved: 0, settled: 0 });
    });

    it('lists accounts in a stable order, a page at a time after a user id, with their balances (listAccounts)', async () => {
      const l = ledger();
      if (!l.listAccounts) return;
      const prefix = uid('list');
      const ids = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
      await l.credit(ids[1]!, 5);
      await l.openAccount(ids[0]!, 3);
      await l.credit(ids[2]!, 7);
      expect(await l.reserve(ids[2]!, uid('gen'), 2)).toBe('ok');
      const seen: Array<{ userId: string; balance: number; reserved: number; settled: number }> = [];
      let after: string | undefined;
      for (let page = 0; page < 10_000; page++) {
        const rows = await l.listAccounts(2, after);
        expect(rows.length).toBeLessThanOrEqual(2);
        seen.push(...rows);
        if (rows.length < 2) break;
        after = rows[rows.length - 1]!.userId;
      }
      const mine = seen.filter((r) => r.userId.startsWith(prefix));
      expect(mine).toEqual([
        { userId: ids[0], balance: 3, reserved: 0, settled: 0 },
        { userId: ids[1], balance: 5, reserved: 0, settled: 0 },
        { userId: ids[2], balance: 5, reserved: 2, settled: 0 },
      ]);
      // Each account once, and the same order on a second walk.
      expect(new Set(seen.map((r) => r.userId)).size).toBe(seen.length);
      expect((await l.listAccounts(1, ids[0])).map((r) => r.userId)).toEqual([ids[1]]);
      expect(await l.listAccounts(0)).toEqual([]);
    });

    it('credits create the account and add up', async () => {
      const user = await userWith(5);
      await ledger().credit(user, 7);
      await ledger().credit(user, 0);
      await expectAccount(user, { balance: 12, reserved: 0, settled: 0 });
    });

    it('opens an account once: exactly one of 20 racing opens creates it, the others change nothing', async () => {
      const user = uid('user');
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => ledger().openAccount(user, 10 + i)));
      expect(results.filter((r) => r)).toHaveLength(1);
      const balance = await ledger().balance(user);
      expect(balance).toBe(10 + results.indexOf(true));
      expect(await ledger().openAccount(user, 0)).toBe(false);
      await expectAccount(user, { balance, reserved: 0, settled: 0 });
      const credited = await userWith(5);
      expect(await ledger().openAccount(credited, 100)).toBe(false);
      await expectAccount(credited, { balance: 5, reserved: 0, settled: 0 });
      const empty = uid('user');
      expect(await ledger().openAccount(empty, 0)).toBe(true);
      await expect(ledger().openAccount(uid('user'), -1)).rejects.toThrow();
      await expect(ledger().openAccount(uid('user'), Number.NaN)).rejects.toThrow();
    });

    it('never lets a negative credit drain a balance', async () => {
      const user = await userWith(10);
      await ledger().credit(user, -5).catch(() => undefined);
      await expectAccount(user, { balance: 10, reserved: 0, settled: 0 });
    });

    it('bounds amounts at MAX_TOKENS: out-of-bound credits and opens throw a RangeError and create nothing', async () => {
      for (const bad of [MAX_TOKENS + 2, 1.7e308, Number.POSITIVE_INFINITY, Number.NaN, -1]) {
        const user = uid('user');
        await expect(ledger().openAccount(user, bad)).rejects.toThrow(RangeError);
        await expect(ledger().credit(user, bad)).rejects.toThrow(RangeError);
        await expectAccount(user, { balance: 0, reserved: 0, settled: 0 });
        expect(await ledger().openAccount(user, 1)).toBe(true);
      }
      const full = uid('user');
      expect(await ledger().openAccount(full, MAX_TOKENS)).toBe(true);
      await expectAccount(full, { balance: MAX_TOKENS, reserved: 0, settled: 0 });
    });

    it('refuses a credit that would take balance plus reserved past MAX_TOKENS, changing nothing (issue 37)', async () => {
      // The case: a balance of 1.7e308 is refused, and so is what would double a large one.
      const big = uid('user');
      expect(await ledger().openAccount(big, MAX_TOKENS)).toBe(true);
      await expect(ledger().credit(big, MAX_TOKENS)).rejects.toThrow(RangeError);
      await expect(ledger().credit(big, 1)).rejects.toThrow(RangeError);
      await ledger().credit(big, 0);
      await expectAccount(big, { balance: MAX_TOKENS, reserved: 0, settled: 0 });
      // What reserves hold counts: given back, it returns to the balance.
      const held = await userWith(100);
      const holding = uid('gen');
      expect(await ledger().reserve(held, holding, 40, T0)).toBe('ok');
      await expect(ledger().credit(held, MAX_TOKENS - 99)).rejects.toThrow(RangeError);
      await expectAccount(held, { balance: 60, reserved: 40, settled: 0 });
      await ledger().credit(held, MAX_TOKENS - 100);
      await expectAccount(held, { balance: MAX_TOKENS - 40, reserved: 40, settled: 0 });
      await expect(ledger().credit(held, 0.5)).rejects.toThrow(RangeError);
      expect(await ledger().release(holding)).toBe(0);
      await expectAccount(held, { balance: MAX_TOKENS, reserved: 0, settled: 0 });
      // Charged tokens have left the account: there is room again for what was spent.
      const spent = await userWith(MAX_TOKENS);
      const g = uid('gen');
      expect(await ledger().reserve(spent, g, 1_000, T0)).toBe('ok');
      expect(await ledger().settle(g, 1_000)).toBe(1_000);
      await ledger().credit(spent, 1_000);
      await expectAccount(spent, { balance: MAX_TOKENS, reserved: 0, settled: 1_000 });
    });

    it('keeps the bound under 10 racing credits: exactly the 3 that fit go through', async () => {
      const user = uid('user');
      const step = 2 ** 51;
      const results = await settleAll(Array.from({ length: 10 }, () => ledger().credit(user, step)));
      expect(results.filter((r) => r.ok)).toHaveLength(3);
      for (const r of results) if (!r.ok) expect(r.error).toBeInstanceOf(RangeError);
      await expectAccount(user, { balance: 3 * step, reserved: 0, settled: 0 });
    });

    it('reserves the whole amount or nothing', async () => {
      const user = await userWith(25);
      expect(await ledger().reserve(user, uid('gen'), 10, T0)).toBe('ok');
      await expectAccount(user, { balance: 15, reserved: 10, settled: 0 });
      expect(await ledger().reserve(user, uid('gen'), 16, T0)).toBe('insufficient');
      await expectAccount(user, { balance: 15, reserved: 10, settled: 0 });
      expect(await ledger().reserve(user, uid('gen'), 15, T0)).toBe('ok');
      await expectAccount(user, { balance: 0, reserved: 25, settled: 0 });
      expect(await ledger().reserve(user, uid('gen'), 1, T0)).toBe('insufficient');
    });

    it('holds once when the same generation is reserved again, even after it settled', async () => {
      const user = await userWith(30);
      const gen = uid('gen');
      expect(await ledger().reserve(user, gen, 10, T0)).toBe('ok');
      expect(await ledger().reserve(user, gen, 10, T0)).toBe('ok');
      await expectAccount(user, { balance: 20, reserved: 10, settled: 0 });
      expect(await ledger().settle(gen, 4)).toBe(4);
      // A create retried after a crash must not open a second hold for the same generation.
      expect(await ledger().reserve(user, gen, 10, T0)).toBe('ok');
      await expectAccount(user, { balance: 26, reserved: 0, settled: 4 });
    });

    it('holds once under 20 concurrent reserves of one generation', async () => {
      const user = await userWith(100);
      const gen = uid('gen');
      const results = await Promise.all(Array.from({ length: 20 }, () => ledger().reserve(user, gen, 10, T0)));
      expect(results.every((r) => r === 'ok')).toBe(true);
      await expectAccount(user, { balance: 90, reserved: 10, settled: 0 });
    });

    it('lets exactly 3 of 40 concurrent reserves of 10 through on a balance of 30', async () => {
      const user = await userWith(30);
      const results = await Promise.all(Array.from({ length: 40 }, () => ledger().reserve(user, uid('gen'), 10, T0)));
      expect(results.filter((r) => r === 'ok')).toHaveLength(3);
      expect(results.filter((r) => r === 'insufficient')).toHaveLength(37);
      await expectAccount(user, { balance: 0, reserved: 30, settled: 0 });
    });

    it('never overdraws under concurrent reserves of mixed sizes', async () => {
      const user = await userWith(50);
      const sizes = Array.from({ length: 30 }, (_, i) => (i % 7) + 1);
      const results = await Promise.all(sizes.map((n) => ledger().reserve(user, uid('gen'), n, T0)));
      const held = sizes.filter((_, i) => results[i] === 'ok').reduce((a, b) => a + b, 0);
      const account = await ledger().account(user);
      expect(account.balance).toBeGreaterThanOrEqual(0);
      expect(account).toEqual({ balance: 50 - held, reserved: held, settled: 0 });
      // Greedy or not, a store that refuses what it could hold is wrong: nothing left fits the smallest refused one.
      const refused = sizes.filter((_, i) => results[i] === 'insufficient');
      if (refused.length > 0) expect(Math.min(...refused)).toBeGreaterThan(account.balance);
    });

    it('keeps users apart', async () => {
      const alice = await userWith(10);
      const bob = await userWith(10);
      expect(await ledger().reserve(alice, uid('gen'), 10, T0)).toBe('ok');
      expect(await ledger().reserve(alice, uid('gen'), 1, T0)).toBe('insufficient');
      await expectAccount(bob, { balance: 10, reserved: 0, settled: 0 });
    });

    describe('settle and release', () => {
      async function reserved(amount: number, balance = 100): Promise<{ user: string; gen: string }> {
        const user = await userWith(balance);
        const gen = uid('gen');
        expect(await ledger().reserve(user, gen, amount, T0)).toBe('ok');
        return { user, gen };
      }

      it('charges the amount and returns the rest of the reserve', async () => {
        const { user, gen } = await reserved(10);
        expect(await ledger().settle(gen, 6)).toBe(6);
        await expectAccount(user, { balance: 94, reserved: 0, settled: 6 });
      });

      it('clamps the charge to the reserve', async () => {
        const { user, gen } = await reserved(10);
        expect(await ledger().settle(gen, 1000)).toBe(10);
        await expectAccount(user, { balance: 90, reserved: 0, settled: 10 });
      });

      it('charges once when settled twice, returning the first amount', async () => {
        const { user, gen } = await reserved(10);
        expect(await ledger().settle(gen, 7)).toBe(7);
        expect(await ledger().settle(gen, 3)).toBe(7);
        expect(await ledger().settle(gen, 10)).toBe(7);
        await expectAccount(user, { balance: 93, reserved: 0, settled: 7 });
      });

      it('release returns the whole reserve and charges nothing', async () => {
        const { user, gen } = await reserved(10);
        expect(await ledger().release(gen)).toBe(0);
        await expectAccount(user, { balance: 100, reserved: 0, settled: 0 });
        expect(await ledger().settle(gen, 5)).toBe(0);
        await expectAccount(user, { balance: 100, reserved: 0, settled: 0 });
      });

      it('release after settle changes nothing and returns the amount charged', async () => {
        const { user, gen } = await reserved(10);
        expect(await ledger().settle(gen, 4)).toBe(4);
        expect(await ledger().release(gen)).toBe(4);
        await expectAccount(user, { balance: 96, reserved: 0, settled: 4 });
      });

      it('answers null for a generation that was never reserved', async () => {
        expect(await ledger().settle(uid('missing'), 5)).toBeNull();
        expect(await ledger().release(uid('missing'))).toBeNull();
      });

      it('answers null for a generation whose reserve was refused', async () => {
        const user = await userWith(5);
        const gen = uid('gen');
        expect(await ledger().reserve(user, gen, 10, T0)).toBe('insufficient');
        expect(await ledger().settle(gen, 5)).toBeNull();
        await expectAccount(user, { balance: 5, reserved: 0, settled: 0 });
      });

      it('charges once under 30 concurrent settles and releases, every caller seeing the same amount', async () => {
        const { user, gen } = await reserved(10);
        const results = await Promise.all(
          Array.from({ length: 30 }, (_, i) => (i % 3 === 0 ? ledger().release(gen) : ledger().settle(gen, (i % 10) + 1))),
        );
        const charged = results[0];
        expect(results.every((r) => r === charged)).toBe(true);
        expect(typeof charged).toBe('number');
        await expectAccount(user, { balance: 100 - charged!, reserved: 0, settled: charged! });
      });

      it('settles each of many reserves on their own', async () => {
        const user = await userWith(100);
        const gens = Array.from({ length: 10 }, () => uid('gen'));
        await Promise.all(gens.map((g) => ledger().reserve(user, g, 10, T0)));
        const charged = await Promise.all(gens.map((g, i) => ledger().settle(g, i)));
        expect(charged).toEqual(gens.map((_, i) => i));
        await expectAccount(user, { balance: 55, reserved: 0, settled: 45 });
      });
    });

    it('keeps balance + reserved + settled equal to the credits through a mixed, concurrent run', async () => {
      const users = [await userWith(40), await userWith(15), await userWith(0)];
      const credits = new Map<string, number>([[users[0]!, 40], [users[1]!, 15], [users[2]!, 0]]);
      const gens: Array<{ gen: string; user: string }> = [];
      for (let round = 0; round < 6; round++) {
        const batch = users.flatMap((user, u) =>
          Array.from({ length: 4 }, (_, i) => {
            const gen = uid('gen');
            gens.push({ gen, user });
            return ledger().reserve(user, gen, ((round + u + i) % 5) + 1, T0 + round);
          }),
        );
        const ends = gens.slice(0, round * 3).map(({ gen }, i) =>
          i % 2 === 0 ? ledger().settle(gen, i % 4) : ledger().release(gen),
        );
        const credit = ledger().credit(users[round % 3]!, round);
        credits.set(users[round % 3]!, credits.get(users[round % 3]!)! + round);
        await Promise.all([...batch, ...ends, credit]);
        for (const user of users) {
          const a = await ledger().account(user);
          expect(a.balance).toBeGreaterThanOrEqual(0);
          expect(a.reserved).toBeGreaterThanOrEqual(0);
          expect(a.balance + a.reserved + a.settled).toBe(credits.get(user));
        }
      }
    });

    describe('key budgets', () => {
      const DAY = 86_400_000;
      const W0 = Date.UTC(2026, 0, 10);

      it('lets exactly 3 of 40 racing reserves of 3 through on a key limited to 10, holding nothing for the rest', async () => {
        const user = await userWith(1_000);
        const key = uid('key');
        const results = await Promise.all(
          Array.from({ length: 40 }, () =>
            ledger().reserve(user, uid('gen'), 3, W0 + 5, { keyId: key, modelId: 'm', keyLimit: { amount: 10, windowStart: W0 } }),
          ),
        );
        expect(results.filter((r) => r === 'ok')).toHaveLength(3);
        expect(results.filter((r) => r === 'budget_exceeded')).toHaveLength(37);
        expect(await ledger().keySpend(key, W0)).toBe(9);
        await expectAccount(user, { balance: 991, reserved: 9, settled: 0 });
      });

      it('holds on neither when the balance is short, and on neither when the key is over', async () => {
        const user = await userWith(5);
        const key = uid('key');
        const limit = { amount: 4, windowStart: W0 };
        expect(await ledger().reserve(user, uid('gen'), 6, W0, { keyId: key, keyLimit: { amount: 100, windowStart: W0 } })).toBe('insufficient');
        expect(await ledger().keySpend(key, W0)).toBe(0);
        expect(await ledger().reserve(user, uid('gen'), 5, W0, { keyId: key, keyLimit: limit })).toBe('budget_exceeded');
        await expectAccount(user, { balance: 5, reserved: 0, settled: 0 });
        expect(await ledger().keySpend(key, W0)).toBe(0);
        expect(await ledger().reserve(user, uid('gen'), 4, W0, { keyId: key, keyLimit: limit })).toBe('ok');
        expect(await ledger().keySpend(key, W0)).toBe(4);
      });

      it('gives the unspent part of a settled or released reserve back to the key window it was held in', async () => {
        const user = await userWith(100);
        const key = uid('key');
        const limit = { amount: 10, windowStart: W0 };
        const [a, b, c] = [uid('gen'), uid('gen'), uid('gen')];
        expect(await ledger().reserve(user, a, 4, W0, { keyId: key, keyLimit: limit })).toBe('ok');
        expect(await ledger().reserve(user, b, 4, W0, { keyId: key, keyLimit: limit })).toBe('ok');
        expect(await ledger().reserve(user, c, 4, W0, { keyId: key, keyLimit: limit })).toBe('budget_exceeded');
        expect(await ledger().settle(a, 1, W0 + 10)).toBe(1);
        expect(await ledger().keySpend(key, W0)).toBe(5);
        expect(await ledger().release(b, W0 + 10)).toBe(0);
        expect(await ledger().keySpend(key, W0)).toBe(1);
        // A retried settle gives nothing back twice.
        expect(await ledger().release(b, W0 + 10)).toBe(0);
        expect(await ledger().settle(a, 0, W0 + 10)).toBe(1);
        expect(await ledger().keySpend(key, W0)).toBe(1);
        expect(await ledger().reserve(user, c, 9, W0, { keyId: key, keyLimit: limit })).toBe('ok');
        expect(await ledger().keySpend(key, W0)).toBe(10);
        // Settled in the next window: the spend is given back to the window it was held in.
        expect(await ledger().release(c, W0 + DAY + 1)).toBe(0);
        expect(await ledger().keySpend(key, W0)).toBe(1);
        expect(await ledger().keySpend(key, W0 + DAY)).toBe(0);
      });

      it('keeps windows and keys apart, and a retried reserve holds once on the key', async () => {
        const user = await userWith(100);
        const [k1, k2] = [uid('key'), uid('key')];
        const gen = uid('gen');
        expect(await ledger().reserve(user, gen, 10, W0, { keyId: k1, keyLimit: { amount: 10, windowStart: W0 } })).toBe('ok');
        expect(await ledger().reserve(user, gen, 10, W0, { keyId: k1, keyLimit: { amount: 10, windowStart: W0 } })).toBe('ok');
        expect(await ledger().keySpend(k1, W0)).toBe(10);
        expect(await ledger().reserve(user, uid('gen'), 10, W0 + DAY, { keyId: k1, keyLimit: { amount: 10, windowStart: W0 + DAY } })).toBe('ok');
        expect(await ledger().reserve(user, uid('gen'), 10, W0, { keyId: k2, keyLimit: { amount: 10, windowStart: W0 } })).toBe('ok');
        expect(await ledger().keySpend(k1, W0)).toBe(10);
        expect(await ledger().keySpend(k1, W0 + DAY)).toBe(10);
        expect(await ledger().keySpend(k2, W0)).toBe(10);
        await expectAccount(user, { balance: 70, reserved: 30, settled: 0 });
      });

      it('never passes the limit while reserves, settles and releases race', async () => {
        const user = await userWith(10_000);
        const key = uid('key');
        const limit = { amount: 20, windowStart: W0 };
        const held: string[] = [];
        const reserveOne = async (): Promise<ReserveResult | ReserveOutcome> => {
          const gen = uid('gen');
          const r = await ledger().reserve(user, gen, 3, W0, { keyId: key, keyLimit: limit });
          if (r === 'ok') held.push(gen);
          return r;
        };
        for (let round = 0; round < 5; round++) {
          const ends = held.splice(0, 3).map((gen, i) => (i % 2 === 0 ? ledger().release(gen, W0) : ledger().settle(gen, 1, W0)));
          await Promise.all([...Array.from({ length: 12 }, reserveOne), ...ends]);
          expect(await ledger().keySpend(key, W0)).toBeLessThanOrEqual(20);
        }
        const account = await ledger().account(user);
        expect(await ledger().keySpend(key, W0)).toBe(account.reserved + account.settled);
      });

      it('caps a key in flight: exactly 2 of 10 racing reserves with keyMaxInFlight 2, holding nothing for the rest; a settle frees a slot', async () => {
        const user = await userWith(100);
        const key = uid('key');
        const ids = Array.from({ length: 10 }, () => uid('gen'));
        const results = await Promise.all(ids.map((id) => ledger().reserve(user, id, 1, W0, { keyId: key, keyMaxInFlight: 2 })));
        const held = ids.filter((_, i) => results[i] === 'ok');
        expect(held).toHaveLength(2);
        expect(results.filter((r) => r === 'limit_reached')).toHaveLength(8);
        await expectAccount(user, { balance: 98, reserved: 2, settled: 0 });
        // A reserve made without the cap is not counted, and counts nothing.
        expect(await ledger().reserve(user, uid('gen'), 1, W0, { keyId: key })).toBe('ok');
        expect(await ledger().settle(held[0]!, 1, W0)).toBe(1);
        expect(await ledger().reserve(user, uid('gen'), 1, W0, { keyId: key, keyMaxInFlight: 2 })).toBe('ok');
        expect(await ledger().reserve(user, uid('gen'), 1, W0, { keyId: key, keyMaxInFlight: 2 })).toBe('limit_reached');
        // A batch counts each of its reserves.
        const other = uid('key');
        expect(await ledger().reserveMany(user, [{ generationId: uid('gen'), amount: 1 }, { generationId: uid('gen'), amount: 1 }], W0, { keyId: other, keyMaxInFlight: 1 })).toBe('limit_reached');
        expect(await ledger().reserveMany(user, [{ generationId: uid('gen'), amount: 1 }], W0, { keyId: other, keyMaxInFlight: 1 })).toBe('ok');
        await expectAccount(user, { balance: 95, reserved: 4, settled: 1 });
      });

      it('answers 0 spend for a key or window never used', async () => {
        expect(await ledger().keySpend(uid('key'), W0)).toBe(0);
      });
    });

    describe('usage', () => {
      const D = Date.UTC(2026, 2, 1);
      const DAY = 86_400_000;

      async function spend(user: string, modelId: string, keyId: string | undefined, price: number, charge: number, settledAt: number): Promise<void> {
        const gen = uid('gen');
        expect(await ledger().reserve(user, gen, price, settledAt - 1, { modelId, ...(keyId !== undefined ? { keyId } : {}) })).toBe('ok');
        await ledger().settle(gen, charge, settledAt);
      }

      it('counts settled reserves on the days from..to by day, model and key, and only the caller\'s', async () => {
        const user = await userWith(1_000);
        const other = await userWith(1_000);
        const [k1, k2] = [uid('key'), uid('key')];
        await spend(user, 'image', k1, 10, 10, D + 1);
        await spend(user, 'image', k2, 10, 4, D + DAY + 5);
        await spend(user, 'video', k1, 20, 20, D + DAY + 6);
        await spend(user, 'text', undefined, 5, 0, D + 2 * DAY);
        await spend(user, 'image', k1, 10, 10, D - 1); // the day before from
        await spend(user, 'image', k1, 10, 10, D + 3 * DAY); // the day after to
        await spend(other, 'image', k1, 10, 10, D + 1);
        // Open: not usage yet.
        await ledger().reserve(user, uid('gen'), 7, D + 1, { modelId: 'image', keyId: k1 });

        const q = { from: '2026-03-01', to: '2026-03-03' };
        expect(await ledger().usage(user, { ...q, groupBy: 'day' })).toEqual({
          rows: [
            { group: '2026-03-01', count: 1, tokens: 10 },
            { group: '2026-03-02', count: 2, tokens: 24 },
            { group: '2026-03-03', count: 1, tokens: 0 },
          ],
          total: { count: 4, tokens: 34 },
        });
        expect(await ledger().usage(user, { ...q, groupBy: 'model' })).toEqual({
          rows: [
            { group: 'video', count: 1, tokens: 20 },
            { group: 'image', count: 2, tokens: 14 },
            { group: 'text', count: 1, tokens: 0 },
          ],
          total: { count: 4, tokens: 34 },
        });
        const byKey = await ledger().usage(user, { ...q, groupBy: 'key' });
        expect(byKey.total).toEqual({ count: 4, tokens: 34 });
        expect(byKey.rows).toEqual([
          { group: k1, count: 2, tokens: 30 },
          { group: k2, count: 1, tokens: 4 },
          { group: null, count: 1, tokens: 0 },
        ]);
        expect(await ledger().usage(uid('nobody'), { ...q, groupBy: 'day' })).toEqual({ rows: [], total: { count: 0, tokens: 0 } });
      });

      it('answers long ranges by model and key exactly, whatever their ends (spans of days kept beside the days, issue 36)', async () => {
        const user = await userWith(100_000);
        const first = Math.floor(D / DAY) - 100; // not aligned to 8 or 64 days
        const models = ['a', 'b', 'c'];
        const keys = [uid('key'), uid('key')];
        const spent: Array<{ day: number; model: string; key: string; charge: number }> = [];
        for (let i = 0; i < 150; i++) {
          const s = { day: first + i, model: models[i % 3]!, key: keys[i % 2]!, charge: (i % 7) + 1 };
          spent.push(s);
          await spend(user, s.model, s.key, 10, s.charge, s.day * DAY + 3_600_000);
        }
        const iso = (day: number): string => new Date(day * DAY).toISOString().slice(0, 10);
        for (const [a, b] of [[0, 149], [3, 140], [9, 72], [63, 64], [0, 0], [17, 130], [-5, 200]] as const) {
          for (const groupBy of ['model', 'key'] as const) {
            const want = new Map<string, { count: number; tokens: number }>();
            for (const s of spent) {
              if (s.day < first + a || s.day > first + b) continue;
              const g = groupBy === 'model' ? s.model : s.key;
              const row = want.get(g) ?? { count: 0, tokens: 0 };
              row.count++;
              row.tokens += s.charge;
              want.set(g, row);
            }
            const got = await ledger().usage(user, { from: iso(first + a), to: iso(first + b), groupBy });
            expect(Object.fromEntries(got.rows.map((r) => [r.group, { count: r.count, tokens: r.tokens }])), `${groupBy} ${a}..${b}`).toEqual(Object.fromEntries(want));
          }
        }
      });

      it('counts a settle of 0 (a free failure) but not a release (a create undone: no generation was ever made)', async () => {
        const user = await userWith(100);
        const [free, undone] = [uid('gen'), uid('gen')];
        for (const g of [free, undone]) expect(await ledger().reserve(user, g, 5, D, { modelId: 'image' })).toBe('ok');
        expect([await ledger().settle(free, 0, D + 10), await ledger().release(undone, D + 10), await ledger().release(undone, D + 20)]).toEqual([0, 0, 0]);
        const q = { from: '2026-03-01', to: '2026-03-01' };
        for (const groupBy of ['day', 'model', 'key'] as const) expect((await ledger().usage(user, { ...q, groupBy })).total).toEqual({ count: 1, tokens: 0 });
        expect(await ledger().account(user)).toEqual({ balance: 100, reserved: 0, settled: 0 });
      });

      it('stays exact under racing settles: 40 reserves settled at once (each twice), on one day, model and key (issue 36)', async () => {
        const user = await userWith(1_000);
        const key = uid('key');
        const gens = Array.from({ length: 40 }, () => uid('gen'));
        for (const g of gens) expect(await ledger().reserve(user, g, 5, D, { modelId: 'image', keyId: key })).toBe('ok');
        // Every settle twice at once (a retry racing the first): the rollup counts each generation once.
        await Promise.all(gens.flatMap((g, i) => [ledger().settle(g, i % 5, D + 10), ledger().settle(g, i % 5, D + 10)]));
        const tokens = gens.reduce((sum, _g, i) => sum + (i % 5), 0);
        for (const groupBy of ['day', 'model', 'key'] as const) {
          const report = await ledger().usage(user, { from: '2026-03-01', to: '2026-03-01', groupBy });
          expect(report.total).toEqual({ count: 40, tokens });
          expect(report.rows).toHaveLength(1);
        }
      });
    });

    describe('in-flight cap (a ledger with holdsInFlight)', () => {
      const capped = (): boolean => ledger().holdsInFlight === true;

      it('lets exactly 3 of 20 racing reserves through at maxInFlight 3, holding nothing for the rest', async () => {
        if (!capped()) return;
        const user = await userWith(1_000);
        const results = await Promise.all(Array.from({ length: 20 }, () => ledger().reserve(user, uid('gen'), 10, T0, { maxInFlight: 3 })));
        expect(results.filter((r) => r === 'ok')).toHaveLength(3);
        expect(results.filter((r) => r === 'in_flight_limit')).toHaveLength(17);
        await expectAccount(user, { balance: 970, reserved: 30, settled: 0 });
      });

      it('frees a slot on settle and on release; a retried reserve counts once; the balance is asked first', async () => {
        if (!capped()) return;
        const user = await userWith(100);
        const [a, b] = [uid('gen'), uid('gen')];
        expect(await ledger().reserve(user, a, 10, T0, { maxInFlight: 2 })).toBe('ok');
        expect(await ledger().reserve(user, a, 10, T0, { maxInFlight: 2 })).toBe('ok');
        expect(await ledger().reserve(user, b, 10, T0, { maxInFlight: 2 })).toBe('ok');
        expect(await ledger().reserve(user, uid('gen'), 10, T0, { maxInFlight: 2 })).toBe('in_flight_limit');
        expect(await ledger().reserve(user, uid('gen'), 1_000, T0, { maxInFlight: 2 })).toBe('insufficient');
        await ledger().settle(a, 4);
        await ledger().settle(a, 4);
        expect(await ledger().reserve(user, uid('gen'), 10, T0, { maxInFlight: 2 })).toBe('ok');
        await ledger().release(b);
        expect(await ledger().reserve(user, uid('gen'), 10, T0, { maxInFlight: 2 })).toBe('ok');
        expect(await ledger().reserve(user, uid('gen'), 10, T0, { maxInFlight: 2 })).toBe('in_flight_limit');
        await expectAccount(user, { balance: 76, reserved: 20, settled: 4 });
      });

      it('counts a batch in flight without refusing it; a free reserve counts too', async () => {
        if (!capped()) return;
        const user = await userWith(100);
        const items = Array.from({ length: 3 }, () => ({ generationId: uid('gen'), amount: 1 }));
        expect(await ledger().reserveMany(user, items, T0)).toBe('ok');
        expect(await ledger().reserve(user, uid('gen'), 0, T0, { maxInFlight: 4 })).toBe('ok');
        expect(await ledger().reserve(user, uid('gen'), 0, T0, { maxInFlight: 4 })).toBe('in_flight_limit');
        expect(await ledger().reserve(uid('user'), uid('gen'), 0, T0, { maxInFlight: 1 })).toBe('ok');
      });
    });

    describeOpenReserves(ledger, userWith);
    describeOrganizationLedger(ledger, userWith, expectAccount);
    describeUserLimitLedger(ledger, userWith, expectAccount);
  });
}
