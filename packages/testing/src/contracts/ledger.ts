import { describe, expect, it } from 'vitest';
import type { AccountSnapshot, Ledger } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

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

    it('credits create the account and add up', async () => {
      const user = await userWith(5);
      await ledger().credit(user, 7);
      await ledger().credit(user, 0);
      await expectAccount(user, { balance: 12, reserved: 0, settled: 0 });
    });

    it('never lets a negative credit drain a balance', async () => {
      const user = await userWith(10);
      await ledger().credit(user, -5).catch(() => undefined);
      await expectAccount(user, { balance: 10, reserved: 0, settled: 0 });
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

    describe('openReserves', () => {
      it('lists reserves neither settled nor released, oldest first, up to the limit', async () => {
        const user = await userWith(100);
        const other = await userWith(100);
        const g3 = uid('gen');
        const g1 = uid('gen');
        const g2 = uid('gen');
        const settled = uid('gen');
        const released = uid('gen');
        await ledger().reserve(user, g3, 3, T0 + 300);
        await ledger().reserve(user, g1, 1, T0 + 100);
        await ledger().reserve(other, g2, 2, T0 + 200);
        await ledger().reserve(user, settled, 4, T0 + 50);
        await ledger().reserve(user, released, 5, T0 + 60);
        await ledger().settle(settled, 4);
        await ledger().release(released);

        expect(await ledger().openReserves(100)).toEqual([
          { generationId: g1, userId: user, amount: 1, createdAt: T0 + 100 },
          { generationId: g2, userId: other, amount: 2, createdAt: T0 + 200 },
          { generationId: g3, userId: user, amount: 3, createdAt: T0 + 300 },
        ]);
        expect((await ledger().openReserves(1)).map((r) => r.generationId)).toEqual([g1]);
        expect(await ledger().openReserves(0)).toEqual([]);
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
  });
}
