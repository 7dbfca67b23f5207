import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GenerationEvent } from '@genservice/core/ports';
import { createSqliteStores } from '../src/index.js';
import { exited, killFixtures, nextJsonLine, spawnFixture, tempDir } from './helpers.js';
import { until } from '@genservice/testing';

// The feed guarantee of the port: a reader walking readFeed from cursor to cursor while many writers commit late
// receives every committed event exactly once, each generation's in seq order, and never one that rolled back.

let tmp: Awaited<ReturnType<typeof tempDir>>;

beforeEach(async () => {
  tmp = await tempDir();
});

afterEach(async () => {
  killFixtures();
  await tmp.remove();
});

const PROCESSES = 4;
const WRITERS_PER_PROCESS = 8;
const GENERATIONS_PER_WRITER = 4;

describe('the feed under concurrent writers', () => {
  it(`${PROCESSES * WRITERS_PER_PROCESS} writers in ${PROCESSES} processes with random commit delays: a concurrent reader gets every event once, in order`, async () => {
    const reader = createSqliteStores({ filename: tmp.file(), busyTimeoutMs: 120_000 });
    try {
      const children = Array.from({ length: PROCESSES }, (_, i) =>
        spawnFixture('feed-writers-child.ts', [tmp.file(), String(i), String(WRITERS_PER_PROCESS), String(GENERATIONS_PER_WRITER)]),
      );
      await Promise.all(children.map((c) => nextJsonLine<{ ready: true }>(c)));
      const reports = children.map((c) => nextJsonLine<{ committed: Record<string, string[]> }>(c));
      let running = children.length;
      for (const child of children) void exited(child).then(() => running--);
      for (const child of children) child.stdin!.write('go\n');

      // Small pages, read while the writers run, until they have all exited and a read finds nothing more.
      const received: GenerationEvent[] = [];
      let cursor = '';
      let pagesWhileWriting = 0;
      for (;;) {
        const writing = running > 0;
        const page = await reader.store.readFeed(cursor, 16);
        received.push(...page.events);
        if (page.events.length === 0) {
          expect(page.cursor).toBe(cursor);
          if (!writing) break;
          // Caught up with the writers: look again once they have committed more (or all exited).
          await until(async () => running === 0 || (await reader.store.readFeed(cursor, 1)).events.length > 0, { what: 'more events or the writers done', timeoutMs: 60_000, intervalMs: 1 });
        } else {
          expect(Number(page.cursor)).toBeGreaterThan(cursor === '' ? 0 : Number(cursor));
          if (writing) pagesWhileWriting++;
        }
        cursor = page.cursor;
      }
      const committed: Record<string, string[]> = Object.assign({}, ...(await Promise.all(reports)).map((r) => r.committed));

      // The reader really read alongside the writers, not only after them.
      expect(pagesWhileWriting).toBeGreaterThan(1);
      const ids = Object.keys(committed);
      expect(ids).toHaveLength(PROCESSES * WRITERS_PER_PROCESS * GENERATIONS_PER_WRITER);
      // Exactly once: no (generation, seq) twice, and as many as committed.
      const keys = received.map((e) => `${e.generationId}#${e.seq}`);
      expect(new Set(keys).size).toBe(keys.length);
      expect(received).toHaveLength(ids.reduce((n, id) => n + committed[id]!.length, 0));
      for (const id of ids) {
        const mine = received.filter((e) => e.generationId === id);
        // In order, numbered 1, 2, ... with no gap a rolled-back change could have left, and what committed.
        expect(mine.map((e) => e.seq)).toEqual(mine.map((_, i) => i + 1));
        expect(mine.map((e) => e.type)).toEqual(committed[id]);
        expect(mine[mine.length - 1]!.type).toBe('completed');
      }
      // Some progress changes were rolled back, so the check above covered events that never existed.
      expect(ids.some((id) => committed[id]!.filter((t) => t === 'progress').length < 2)).toBe(true);
      expect(await reader.store.feedHead()).toBe(cursor);
    } finally {
      await reader.close();
    }
  }, 120_000);
});
