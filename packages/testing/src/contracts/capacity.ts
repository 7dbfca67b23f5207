import { describe, expect, it } from 'vitest';
import { LANE_WAITER_TTL_MS, type CapacityAsk, type CapacityStore } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

export interface CapacityUnderTest {
  capacity: CapacityStore;
  /** A second handle on the same counters (another instance's connection), when the backend has one. */
  other?: CapacityStore;
  close(): Promise<void>;
}

/** Contract suite for a CapacityStore (provider lanes' shared counters); `make()` runs before every test. */
export function runCapacityContract(name: string, make: () => Promise<CapacityUnderTest>): void {
  describe(`${name}: CapacityStore contract`, () => {
    const ports = useFresh(make);
    const store = (): CapacityStore => ports().capacity;
    const ask = (permitId: string, now = T0, units = 1) => ({ permitId, units, now, holdMs: 60_000 });

    it('a lane without limits never refuses', async () => {
      const lane = uid('lane');
      for (let i = 0; i < 20; i++) expect(await store().acquire(lane, {}, ask(`p${i}`))).toEqual({ granted: true });
    });

    it('concurrency: slots held by other permits refuse (no retryAfterMs); the same permit renews; release frees', async () => {
      const lane = uid('lane');
      const limits = { concurrency: 2 };
      expect((await store().acquire(lane, limits, ask('a'))).granted).toBe(true);
      expect((await store().acquire(lane, limits, ask('b'))).granted).toBe(true);
      expect(await store().acquire(lane, limits, ask('c'))).toEqual({ granted: false });
      expect((await store().acquire(lane, limits, ask('a'))).granted).toBe(true);
      await store().release(lane, 'a');
      await store().release(lane, 'a');
      expect((await store().acquire(lane, limits, ask('c'))).granted).toBe(true);
      expect((await store().acquire(lane, limits, ask('d'))).granted).toBe(false);
      // Another lane is independent.
      expect((await store().acquire(uid('lane'), limits, ask('d'))).granted).toBe(true);
    });

    it('a slot not released expires after holdMs', async () => {
      const lane = uid('lane');
      await store().acquire(lane, { concurrency: 1 }, { permitId: 'a', units: 1, now: T0, holdMs: 1000 });
      expect((await store().acquire(lane, { concurrency: 1 }, ask('b', T0 + 999))).granted).toBe(false);
      expect((await store().acquire(lane, { concurrency: 1 }, ask('b', T0 + 1000))).granted).toBe(true);
    });

    it('requestsPerMinute: no more in any 60 s; retryAfterMs until the oldest leaves the window', async () => {
      const lane = uid('lane');
      const limits = { requestsPerMinute: 3 };
      for (let i = 0; i < 3; i++) {
        expect((await store().acquire(lane, limits, ask(`p${i}`, T0 + i * 1000))).granted).toBe(true);
        await store().release(lane, `p${i}`);
      }
      expect(await store().acquire(lane, limits, ask('x', T0 + 59_999))).toEqual({ granted: false, retryAfterMs: 1 });
      expect((await store().acquire(lane, limits, ask('x', T0 + 60_000))).granted).toBe(true);
      expect(await store().acquire(lane, limits, ask('y', T0 + 60_000))).toEqual({ granted: false, retryAfterMs: 1000 });
    });

    it('a refund takes back the request a release names', async () => {
      const lane = uid('lane');
      const limits = { requestsPerMinute: 1 };
      expect((await store().acquire(lane, limits, ask('a', T0))).granted).toBe(true);
      await store().release(lane, 'a', { at: T0 });
      expect((await store().acquire(lane, limits, ask('b', T0 + 5))).granted).toBe(true);
      expect((await store().acquire(lane, limits, ask('c', T0 + 6))).granted).toBe(false);
    });

    it('unitsPerMinute: refuses what would exceed it, but a request larger than the limit runs alone', async () => {
      const lane = uid('lane');
      const limits = { unitsPerMinute: 10 };
      expect((await store().acquire(lane, limits, ask('a', T0, 6))).granted).toBe(true);
      expect(await store().acquire(lane, limits, ask('b', T0 + 10, 5))).toEqual({ granted: false, retryAfterMs: 59_990 });
      expect((await store().acquire(lane, limits, ask('c', T0 + 10, 4))).granted).toBe(true);
      expect((await store().acquire(lane, limits, ask('d', T0 + 60_010, 25))).granted).toBe(true);
      expect((await store().acquire(lane, limits, ask('e', T0 + 60_011, 1))).granted).toBe(false);
    });

    it('pause refuses until its end, with retryAfterMs; an earlier pause never shortens it', async () => {
      const lane = uid('lane');
      await store().pause(lane, T0 + 5000);
      await store().pause(lane, T0 + 1000);
      expect(await store().acquire(lane, {}, ask('a', T0 + 2000))).toEqual({ granted: false, retryAfterMs: 3000 });
      expect((await store().acquire(lane, {}, ask('a', T0 + 5000))).granted).toBe(true);
    });

    it('racing asks are granted no more than the limits allow (over two handles when there are two)', async () => {
      const lane = uid('lane');
      const limits = { concurrency: 3, requestsPerMinute: 5 };
      const handles = [store(), ports().other ?? store()];
      const grants = await Promise.all(Array.from({ length: 20 }, (_, i) => handles[i % 2]!.acquire(lane, limits, ask(`p${i}`, T0 + i))));
      expect(grants.filter((g) => g.granted)).toHaveLength(3);
      for (let i = 0; i < 20; i++) await store().release(lane, `p${i}`);
      const again = await Promise.all(Array.from({ length: 20 }, (_, i) => handles[i % 2]!.acquire(lane, limits, ask(`q${i}`, T0 + 100))));
      expect(again.filter((g) => g.granted)).toHaveLength(2);
    });

    describe('fair turns (asks with `fair`: the lane\'s free slots by tenant weight, over every handle)', () => {
      const fairAsk = (waiter: string, tenant: string, weight = 1, now = T0): CapacityAsk => ({ permitId: waiter, units: 1, now, holdMs: 60_000, fair: { tenant, weight, waiter } });
      const handles = (): CapacityStore[] => [store(), ports().other ?? store()];

      it('with room, the slot goes to the live tenant with the lowest virtual time; another tenant is refused without retryAfterMs', async () => {
        const lane = uid('lane');
        const limits = { concurrency: 1 };
        expect(await store().acquire(lane, limits, fairAsk('b0', 'B'))).toEqual({ granted: true });
        await store().release(lane, 'b0');
        // The slot held (an ask without fairness): A and B wait, both live.
        expect((await store().acquire(lane, limits, ask('x'))).granted).toBe(true);
        expect(await store().acquire(lane, limits, fairAsk('a1', 'A'))).toEqual({ granted: false });
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B'))).toEqual({ granted: false });
        await store().release(lane, 'x');
        // B has had a turn, A not: B is refused while A waits, though the lane has room.
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B', 1, T0 + 1))).toEqual({ granted: false });
        expect(await store().acquire(lane, limits, fairAsk('a1', 'A', 1, T0 + 2))).toEqual({ granted: true });
        await store().release(lane, 'a1');
        // A's waiter left with its grant: B's turn now.
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B', 1, T0 + 3))).toEqual({ granted: true });
      });

      it('tenants that all keep waiting share the grants by weight, whichever handle asks and in whatever order', async () => {
        const lane = uid('lane');
        const limits = { concurrency: 1 };
        const weights: Record<string, number> = { bronze: 1, silver: 2, gold: 5 };
        const waiting: Record<string, string> = {};
        const waiterOf = (tenant: string): string => {
          waiting[tenant] ??= uid(tenant);
          return waiting[tenant]!;
        };
        expect((await store().acquire(lane, limits, ask('x'))).granted).toBe(true);
        for (const tenant of Object.keys(weights)) expect((await store().acquire(lane, limits, fairAsk(waiterOf(tenant), tenant, weights[tenant]))).granted).toBe(false);
        await store().release(lane, 'x');
        const grants: Record<string, number> = { bronze: 0, silver: 0, gold: 0 };
        const order = Object.keys(weights);
        for (let round = 0; round < 40; round++) {
          // Each round every tenant asks (lightest first, or heaviest first) until one is granted, then it frees the slot.
          const asking = round % 2 === 0 ? order : [...order].reverse();
          let granted: string | undefined;
          for (const [i, tenant] of asking.entries()) {
            const waiter = waiterOf(tenant);
            const g = await handles()[(round + i) % 2]!.acquire(lane, limits, fairAsk(waiter, tenant, weights[tenant], T0 + 10 * (round + 1)));
            if (!g.granted) continue;
            granted = tenant;
            grants[tenant]!++;
            // The tenant has more work: its next job asks while the slot is held, and waits.
            delete waiting[tenant];
            expect(await store().acquire(lane, limits, fairAsk(waiterOf(tenant), tenant, weights[tenant], T0 + 10 * (round + 1)))).toEqual({ granted: false });
            await store().release(lane, waiter);
            break;
          }
          expect(granted, `round ${round}: someone is owed the free slot`).toBeDefined();
        }
        expect(Math.abs(grants.gold! - 25), JSON.stringify(grants)).toBeLessThanOrEqual(1);
        expect(Math.abs(grants.silver! - 10)).toBeLessThanOrEqual(1);
        expect(Math.abs(grants.bronze! - 5)).toBeLessThanOrEqual(1);
      });

      it('a waiter that stops asking holds its turn only until LANE_WAITER_TTL_MS after it was due back', async () => {
        const lane = uid('lane');
        const limits = { concurrency: 1 };
        expect((await store().acquire(lane, limits, fairAsk('b0', 'B'))).granted).toBe(true);
        await store().release(lane, 'b0');
        expect((await store().acquire(lane, limits, ask('x'))).granted).toBe(true);
        // Refused for the full lane (no retryAfterMs): due back at once, live for the TTL.
        expect(await store().acquire(lane, limits, fairAsk('a1', 'A'))).toEqual({ granted: false });
        await store().release(lane, 'x');
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B', 1, T0 + LANE_WAITER_TTL_MS - 1))).toEqual({ granted: false });
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B', 1, T0 + LANE_WAITER_TTL_MS))).toEqual({ granted: true });
      });

      it('a waiter told to come back later (retryAfterMs) stays live until then plus the TTL', async () => {
        const lane = uid('lane');
        const limits = { requestsPerMinute: 1 };
        expect((await store().acquire(lane, limits, fairAsk('b0', 'B'))).granted).toBe(true);
        expect(await store().acquire(lane, limits, fairAsk('a1', 'A', 1, T0 + 1))).toEqual({ granted: false, retryAfterMs: 59_999 });
        const due = T0 + 60_000;
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B', 1, due))).toEqual({ granted: false });
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B', 1, due + LANE_WAITER_TTL_MS - 1))).toEqual({ granted: false });
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B', 1, due + LANE_WAITER_TTL_MS))).toEqual({ granted: true });
      });

      it('a tenant that was not waiting banks no credit: it starts level with the tenants that were', async () => {
        const lane = uid('lane');
        const limits = { concurrency: 1 };
        // A alone for 6 grants.
        for (let i = 0; i < 6; i++) {
          expect((await store().acquire(lane, limits, fairAsk(`a${i}`, 'A', 1, T0 + i))).granted).toBe(true);
          await store().release(lane, `a${i}`);
        }
        // Then A and B both wait; of the next 6 grants B takes at most one more than A.
        expect((await store().acquire(lane, limits, ask('x', T0 + 10))).granted).toBe(true);
        const waiting: Record<string, string> = { A: 'a6', B: 'b0' };
        for (const t of ['A', 'B']) expect((await store().acquire(lane, limits, fairAsk(waiting[t]!, t, 1, T0 + 10))).granted).toBe(false);
        await store().release(lane, 'x');
        const seq: string[] = [];
        for (let round = 0; round < 6; round++) {
          for (const t of ['B', 'A']) {
            const waiter = waiting[t]!;
            if (!(await store().acquire(lane, limits, fairAsk(waiter, t, 1, T0 + 20 + round))).granted) continue;
            seq.push(t);
            waiting[t] = `${waiter}+`;
            expect((await store().acquire(lane, limits, fairAsk(waiting[t]!, t, 1, T0 + 20 + round))).granted).toBe(false);
            await store().release(lane, waiter);
            break;
          }
        }
        expect(seq).toHaveLength(6);
        expect(seq.filter((t) => t === 'B').length).toBeLessThanOrEqual(4);
      });

      it('an ask without fairness is decided by the limits alone, whoever is owed', async () => {
        const lane = uid('lane');
        const limits = { concurrency: 2 };
        expect((await store().acquire(lane, limits, fairAsk('b0', 'B'))).granted).toBe(true);
        expect((await store().acquire(lane, limits, ask('x'))).granted).toBe(true);
        expect(await store().acquire(lane, limits, fairAsk('a1', 'A'))).toEqual({ granted: false });
        await store().release(lane, 'x');
        // A is owed the free slot, but a run's further request (no fairness) takes it.
        expect((await store().acquire(lane, limits, ask('y', T0 + 1))).granted).toBe(true);
      });

      it('a refund gives the turn back with the request', async () => {
        const lane = uid('lane');
        const limits = { concurrency: 1 };
        expect((await store().acquire(lane, limits, ask('x'))).granted).toBe(true);
        expect(await store().acquire(lane, limits, fairAsk('a1', 'A'))).toEqual({ granted: false });
        expect(await store().acquire(lane, limits, fairAsk('b1', 'B'))).toEqual({ granted: false });
        await store().release(lane, 'x');
        expect((await store().acquire(lane, limits, fairAsk('a1', 'A', 1, T0 + 1))).granted).toBe(true);
        // A's grant was never used (its job was already claimed elsewhere): refunded, A is level with B again.
        await store().release(lane, 'a1', { at: T0 + 1 });
        expect((await store().acquire(lane, limits, fairAsk('a2', 'A', 1, T0 + 2))).granted).toBe(true);
        await store().release(lane, 'a2');
        // Not refunded: now B is owed.
        expect(await store().acquire(lane, limits, fairAsk('a3', 'A', 1, T0 + 3))).toEqual({ granted: false });
        expect((await store().acquire(lane, limits, fairAsk('b1', 'B', 1, T0 + 4))).granted).toBe(true);
      });

      it('racing fair asks over two handles are granted no more than the limits allow', async () => {
        const lane = uid('lane');
        const limits = { concurrency: 3 };
        const grants = await Promise.all(Array.from({ length: 20 }, (_, i) => handles()[i % 2]!.acquire(lane, limits, fairAsk(`p${i}`, `t${i % 4}`, 1 + (i % 3), T0 + i))));
        expect(grants.filter((g) => g.granted).length).toBeGreaterThanOrEqual(1);
        expect(grants.filter((g) => g.granted).length).toBeLessThanOrEqual(3);
      });
    });
  });
}
