import { describe, expect, it } from 'vitest';
import type { Ledger } from '@genservice/core/ports';
import { T0, uid } from './harness.js';

/**
 * `openReserves`, the list recovery walks to settle or release the reserves a crash left open: oldest first, and a
 * page at a time after the last one read, so a backlog of live reserves older than a forgotten one never hides it.
 */
export function describeOpenReserves(ledger: () => Ledger, userWith: (balance: number) => Promise<string>): void {
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

    it('pages after the last one read (by createdAt, then generationId), each open reserve once, through ties and settles', async () => {
      const user = await userWith(1000);
      // Five at one time and three at the next: pages of three break inside the tie, where only the id orders them.
      const made = new Map<string, number>();
      for (let i = 0; i < 8; i++) {
        const generationId = uid('gen');
        const createdAt = T0 + (i < 5 ? 500 : 501);
        expect(await ledger().reserve(user, generationId, 1, createdAt)).toBe('ok');
        made.set(generationId, createdAt);
      }
      const walked: string[] = [];
      let page = await ledger().openReserves(3);
      for (let pages = 0; page.length > 0 && pages < 10; pages++) {
        walked.push(...page.map((r) => r.generationId));
        // Settled between two pages: the next page still starts right after the last one read.
        if (pages === 0) await ledger().settle(page[0]!.generationId, 1);
        page = await ledger().openReserves(3, page[page.length - 1]);
      }
      expect(walked).toHaveLength(8);
      expect(new Set(walked)).toEqual(new Set(made.keys()));
      const times = walked.map((id) => made.get(id)!);
      expect(times).toEqual([...times].sort((a, b) => a - b));
      // Within one time, the next page's first comes after the last one read: the order holds across a page break.
      const tie = await ledger().openReserves(2, { createdAt: T0 + 500, generationId: walked[1]! });
      expect(tie.map((r) => r.generationId)).toEqual(walked.slice(2, 4));
      // After the newest, nothing.
      const last = walked[walked.length - 1]!;
      expect(await ledger().openReserves(10, { createdAt: made.get(last)!, generationId: last })).toEqual([]);
    });
  });
}
