import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteDatabase } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'genservice-pragmas-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('openSqliteDatabase page cache and mmap', () => {
  it('sets a 64 MiB cache and 256 MiB mmap by default, and what the options say otherwise', () => {
    const a = openSqliteDatabase({ filename: join(dir, 'a.db') });
    expect(a.pragma('cache_size', { simple: true })).toBe(-65536);
    expect(a.pragma('mmap_size', { simple: true })).toBe(256 * 1024 * 1024);
    a.close();
    const b = openSqliteDatabase({ filename: join(dir, 'b.db'), cacheSizeMiB: 8, mmapSizeMiB: 0 });
    expect(b.pragma('cache_size', { simple: true })).toBe(-8192);
    expect(b.pragma('mmap_size', { simple: true })).toBe(0);
    b.close();
  });

  it('refuses values that are not numbers >= 0 before anything reaches a pragma', () => {
    for (const bad of [-1, Number.NaN, Infinity, '64; DROP TABLE generations' as unknown as number]) {
      expect(() => openSqliteDatabase({ filename: join(dir, 'c.db'), cacheSizeMiB: bad })).toThrow(RangeError);
      expect(() => openSqliteDatabase({ filename: join(dir, 'c.db'), mmapSizeMiB: bad })).toThrow(RangeError);
    }
  });
});
