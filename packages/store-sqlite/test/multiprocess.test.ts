import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MIGRATIONS, appliedMigrations, createSqliteStores } from '../src/index.js';
import { newGeneration } from './changes.js';
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

      const all = MIGRATIONS.map((m) => m.version);
      for (const r of results) expect(r).toEqual({ ok: true, versions: all, journal: 'wal' });
      const check = createSqliteStores({ filename: file });
      try {
        expect(appliedMigrations(check.db)).toEqual(all);
      } finally {
        await check.close();
      }
    }
  }, 120_000);

  it('4 processes racing every transition on 40 generations: one event per winning transition, feed positions strictly increasing', async () => {
    const setup = createSqliteStores({ filename: tmp.file() });
    const ids = Array.from({ length: 40 }, (_, i) => `race-${i}`);
    for (const [i, id] of ids.entries()) {
      await setup.store.insert(...newGeneration({ id, ownerId: `u${i % 3}`, modelId: 'm', settings: {}, reserved: 5, createdAt: i }));
    }
    await setup.close();

    const children = Array.from({ length: 4 }, (_, i) => spawnFixture('transitions-child.ts', [tmp.file(), String(i), ids.join(',')]));
    await Promise.all(children.map((c) => nextJsonLine<{ ready: true }>(c)));
    const reports = children.map((c) => nextJsonLine<{ wins: Array<[string, string]> }>(c));
    for (const child of children) child.stdin!.write('go\n');
    const wins = (await Promise.all(reports)).flatMap((r) => r.wins);
    await Promise.all(children.map(exited));

    const check = createSqliteStores({ filename: tmp.file() });
    try {
      const all = await check.store.readFeed('', 100_000);
      const events = all.events;
      expect(events).toHaveLength(ids.length + wins.length);
      // Page by page, the cursor only moves forward and the pages together are the whole feed.
      const paged: typeof events = [];
      for (let cursor = ''; ; ) {
        const page = await check.store.readFeed(cursor, 7);
        if (page.events.length === 0) break;
        if (cursor !== '') expect(Number(page.cursor)).toBeGreaterThan(Number(cursor));
        paged.push(...page.events);
        cursor = page.cursor;
      }
      expect(paged).toEqual(events);
      expect(await check.store.feedHead()).toBe(all.cursor);
      // Every generation was finished by exactly one process, and the races had more than one kind of winner.
      expect(wins.filter(([type]) => type === 'completed' || type === 'failed')).toHaveLength(ids.length);
      expect(new Set(wins.map(([type]) => type))).toEqual(new Set(['processing', 'progress', 'completed', 'failed']));

      for (const id of ids) {
        const mine = events.filter((e) => e.generationId === id);
        // Numbered 1, 2, ... within the generation, in feed order.
        expect(mine.map((e) => e.seq)).toEqual(mine.map((_, i) => i + 1));
        expect(await check.store.eventsOf(id)).toEqual(mine);
        const won = wins.filter(([, w]) => w === id).map(([type]) => type);
        const count = (types: string[]): Record<string, number> =>
          types.reduce<Record<string, number>>((acc, t) => ({ ...acc, [t]: (acc[t] ?? 0) + 1 }), {});
        expect(count(mine.map((e) => e.type))).toEqual(count(['created', ...won]));
        // In seq order: created first, the one terminal event last, claims numbered 1, 2, ... as they happened.
        const record = (await check.store.getById(id))!;
        expect(mine[0]!.type).toBe('created');
        expect(mine[mine.length - 1]!.type).toBe(record.status);
        const claims = mine.filter((e) => e.type === 'processing').map((e) => e.data.claim);
        expect(claims).toEqual(claims.map((_, i) => i + 1));
        expect(record.claims).toBe(claims.length);
        // The fee follows the state the generation left: a cancel of a never-claimed one is free.
        const last = mine[mine.length - 1]!;
        expect(last.data.price).toBe(record.price);
        if (record.status === 'failed' && claims.length === 0) expect(record.price).toBe(0);
        else expect(record.price).toBeGreaterThan(0);
      }
    } finally {
      await check.close();
    }
  }, 60_000);

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
