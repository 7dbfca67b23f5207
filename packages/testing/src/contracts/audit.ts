import { describe, expect, it } from 'vitest';
import type { AuditEntry, AuditLog } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

export interface AuditLogUnderTest {
  auditLog: AuditLog;
  close(): Promise<void>;
}

/** Contract suite for an AuditLog; `make()` runs before every test and must return an empty log. */
export function runAuditLogContract(name: string, make: () => Promise<AuditLogUnderTest>): void {
  describe(`${name}: AuditLog contract`, () => {
    const ports = useFresh(make);
    const log = (): AuditLog => ports().auditLog;

    const entry = (i: number): Omit<AuditEntry, 'id'> => ({
      at: T0 + i,
      actor: 'ops',
      action: i % 2 === 0 ? 'credits.add' : 'key.create',
      userId: `user-${i}`,
      ...(i % 2 === 1 ? { keyId: `key-${i}` } : {}),
      details: { amount: i, reason: `because ${i} \u00e9\u{1f511}`, nested: { list: [1, 'two'] } },
    });

    it('lists entries newest first, whole, in pages that meet without gap or repeat', async () => {
      for (let i = 0; i < 7; i++) await log().append(entry(i));
      const seen: AuditEntry[] = [];
      let before: string | undefined;
      for (let page = 0; page < 10; page++) {
        const got = await log().list({ limit: 3, ...(before !== undefined ? { before } : {}) });
        seen.push(...got.entries);
        if (got.nextCursor === null) break;
        before = got.nextCursor;
      }
      expect(seen.map(({ id: _, ...rest }) => rest)).toEqual([6, 5, 4, 3, 2, 1, 0].map(entry));
      expect(new Set(seen.map((e) => e.id)).size).toBe(7);
    });

    it('answers an empty page for an empty log and a cursor past the start', async () => {
      expect(await log().list({ limit: 10 })).toEqual({ entries: [], nextCursor: null });
      await log().append(entry(1));
      const [only] = (await log().list({ limit: 10 })).entries;
      expect(await log().list({ limit: 10, before: only!.id })).toEqual({ entries: [], nextCursor: null });
    });

    it('keeps every one of 30 concurrent appends', async () => {
      await Promise.all(Array.from({ length: 30 }, (_, i) => log().append({ ...entry(i), actor: uid('actor') })));
      const page = await log().list({ limit: 100 });
      expect(page.entries).toHaveLength(30);
      expect(page.nextCursor).toBeNull();
    });

    it('hands out copies: changing an entry after append or list changes nothing stored', async () => {
      const e = entry(2);
      await log().append(e);
      (e.details as { amount: number }).amount = 999;
      const [first] = (await log().list({ limit: 1 })).entries;
      expect(first?.details).toMatchObject({ amount: 2 });
      (first!.details as { amount: number }).amount = 5;
      expect((await log().list({ limit: 1 })).entries[0]?.details).toMatchObject({ amount: 2 });
    });
  });
}
