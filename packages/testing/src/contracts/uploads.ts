import { describe, expect, it } from 'vitest';
import type { UploadRecord, UploadStore } from '@genservice/core/ports';
import { T0, uid, useFresh } from './harness.js';

export interface UploadStoreUnderTest {
  uploads: UploadStore;
  close(): Promise<void>;
}

/**
 * Contract every UploadStore passes. `make()` runs before every test; each test starts by forgetting every upload
 * the store lists, so a backend that keeps data between tests works too.
 */
export function runUploadStoreContract(name: string, make: () => Promise<UploadStoreUnderTest>): void {
  describe(`${name}: UploadStore contract`, () => {
    const subject = useFresh(make);
    const store = (): UploadStore => subject().uploads;
    const upload = (over: Partial<UploadRecord> = {}): UploadRecord => ({
      key: uid('upload'),
      ownerId: uid('owner'),
      mimeType: 'image/png',
      size: 1234,
      createdAt: T0,
      expiresAt: T0 + 60_000,
      ...over,
    });
    const empty = async (): Promise<void> => {
      for (;;) {
        const left = await store().listExpiredBefore(Number.MAX_SAFE_INTEGER, 500);
        if (left.length === 0) return;
        await store().remove(left.map((u) => u.key));
      }
    };

    it('lists the uploads that expired before a time, oldest expiry first, at most `limit`, with every field', async () => {
      await empty();
      const a = upload({ expiresAt: T0 + 3000, mimeType: 'audio/ogg', size: 0, ownerId: "o'; drop\u00e9" });
      const b = upload({ expiresAt: T0 + 1000 });
      const c = upload({ expiresAt: T0 + 2000 });
      const later = upload({ expiresAt: T0 + 9000 });
      for (const u of [a, b, c, later]) await store().insert(u);
      expect(await store().listExpiredBefore(T0 + 1000, 10)).toEqual([]);
      expect(await store().listExpiredBefore(T0 + 5000, 10)).toEqual([b, c, a]);
      expect(await store().listExpiredBefore(T0 + 5000, 2)).toEqual([b, c]);
      // Reads only: the same answer again.
      expect(await store().listExpiredBefore(T0 + 5000, 2)).toEqual([b, c]);
    });

    it('forgets the uploads it is told to remove (unknown keys skipped), and a second insert of a key changes nothing', async () => {
      await empty();
      const a = upload({ expiresAt: T0 + 1000 });
      const b = upload({ expiresAt: T0 + 2000 });
      await store().insert(a);
      await store().insert(b);
      await store().insert({ ...a, expiresAt: T0 + 99_000, size: 1 });
      expect(await store().listExpiredBefore(T0 + 5000, 10)).toEqual([a, b]);
      await store().remove([a.key, uid('unknown')]);
      expect(await store().listExpiredBefore(T0 + 5000, 10)).toEqual([b]);
      await store().remove([]);
      await store().remove([b.key]);
      expect(await store().listExpiredBefore(Number.MAX_SAFE_INTEGER, 10)).toEqual([]);
    });

    it('keeps a page of many: 250 uploads listed and removed in pages of 100', async () => {
      await empty();
      const all = Array.from({ length: 250 }, (_, i) => upload({ expiresAt: T0 + i }));
      await Promise.all(all.map((u) => store().insert(u)));
      let seen = 0;
      for (;;) {
        const page = await store().listExpiredBefore(T0 + 1000, 100);
        if (page.length === 0) break;
        expect(page.map((u) => u.expiresAt)).toEqual(all.slice(seen, seen + page.length).map((u) => u.expiresAt));
        seen += page.length;
        await store().remove(page.map((u) => u.key));
      }
      expect(seen).toBe(250);
    });
  });
}
