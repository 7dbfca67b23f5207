import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { appliedMigrations, createSqliteStores } from '../src/index.js';
import { exited, killFixtures, nextJsonLine, spawnFixture, tempDir } from './helpers.js';

// Separate Node processes on one file, the way several hosts on one machine share a SQLite database.

let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeEach(async () => {
  tmp = await tempDir();
});

afterEach(async () => {
  killFixtures();
  await tmp.remove();
});

describe('several processes on one file', () => {
  it('4 processes racing 20 reserves of 10 each against a balance of 300: exactly 30 succeed, never below zero', async () => {
    const setup = createSqliteStores({ filename: tmp.file() });
    await setup.ledger.credit('u1', 300);
    await setup.close();

    const children = Array.from({ length: 4 }, (_, i) => spawnFixture('reserve-child.ts', [tmp.file(), String(i), '20', '10']));
    await Promise.all(children.map((c) => nextJsonLine<{ ready: true }>(c)));
    const reports = children.map((c) => nextJsonLine<{ ok: number; insufficient: number; minBalance: number }>(c));
    for (const child of children) child.stdin!.write('go\n');
    const results = await Promise.all(reports);
    await Promise.all(children.map(exited));

    expect(results.reduce((sum, r) => sum + r.ok, 0)).toBe(30);
    expect(results.reduce((sum, r) => sum + r.insufficient, 0)).toBe(50);
    for (const r of results) expect(r.minBalance).toBeGreaterThanOrEqual(0);

    const check = createSqliteStores({ filename: tmp.file() });
    try {
      expect(await check.ledger.account('u1')).toEqual({ balance: 0, reserved: 300, settled: 0 });
      expect(await check.ledger.openReserves(100)).toHaveLength(30);
    } finally {
      await check.close();
    }
  });

  it('8 processes opening a fresh file at once: all succeed, the schema is migrated exactly once', async () => {
    // Several rounds: the race (switching a fresh file to WAL while another process holds a lock) is timing-dependent.
    for (let round = 0; round < 3; round++) {
      const file = tmp.file(`round-${round}.db`);
      const children = Array.from({ length: 8 }, () => spawnFixture('migrate-child.ts', [file]));
      await Promise.all(children.map((c) => nextJsonLine<{ ready: true }>(c)));
      const reports = children.map((c) => nextJsonLine<{ ok: boolean; versions?: number[]; journal?: string; error?: string }>(c));
      for (const child of children) child.stdin!.write('go\n');
      const results = await Promise.all(reports);
      await Promise.all(children.map(exited));

      for (const r of results) expect(r).toEqual({ ok: true, versions: [1], journal: 'wal' });
      const check = createSqliteStores({ filename: file });
      try {
        expect(appliedMigrations(check.db)).toEqual([1]);
      } finally {
        await check.close();
      }
    }
  }, 120_000);

  it('keeps every committed write when the process is killed with SIGKILL (WAL, synchronous=NORMAL)', async () => {
    const child = spawnFixture('crash-child.ts', [tmp.file(), '20']);
    const { committed } = await nextJsonLine<{ committed: string[] }>(child);
    child.kill('SIGKILL');
    await exited(child);
    expect(child.signalCode).toBe('SIGKILL');

    const after = createSqliteStores({ filename: tmp.file() });
    try {
      for (const [i, id] of committed.entries()) {
        const gen = await after.store.getById(id);
        expect(gen).toMatchObject({ id, settings: { i } });
        if (i % 2 === 0) expect(gen).toMatchObject({ status: 'completed', resultText: `done ${i}`, price: 7 });
        else expect(gen?.status).toBe('pending');
      }
      // 20 reserves of 10 from 1000; the 10 completed ones settled at 7 and returned 3 each.
      const account = await after.ledger.account('u1');
      expect(account).toEqual({ balance: 1000 - 200 + 30, reserved: 100, settled: 70 });
      expect(account.balance + account.reserved + account.settled).toBe(1000);
    } finally {
      await after.close();
    }
  });
});
