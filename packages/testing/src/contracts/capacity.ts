import { describe, expect, it } from 'vitest';
import type { CapacityStore } from '@genservice/core/ports';
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
  });
}
