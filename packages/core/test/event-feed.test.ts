import { describe, expect, it } from 'vitest';
import { MemoryGenerationStore, type GenerationEvent } from '@genservice/core';
import { EventFeed, InProcessNotifier } from '../src/push/event-feed.js';
import { silentLogger } from '../src/logger.js';
import type { ResolvedServiceOptions } from '../src/resolved-options.js';

/** Counts what the feed asks of the store; `holdLastSeq` lets a test act while a lastSeq() call is in flight. */
class CountingStore extends MemoryGenerationStore {
  readEventsCalls = 0;
  lastSeqCalls = 0;
  holdLastSeq: Promise<void> | undefined;
  override async readEvents(after: number, limit: number): Promise<GenerationEvent[]> {
    this.readEventsCalls++;
    return super.readEvents(after, limit);
  }
  override async lastSeq(): Promise<number> {
    this.lastSeqCalls++;
    const value = await super.lastSeq();
    if (this.holdLastSeq) await this.holdLastSeq;
    return value;
  }
}

const options = { push: { pollIntervalMs: 60_000 } } as unknown as ResolvedServiceOptions;
const tick = () => new Promise((r) => setImmediate(r));
const settle = async () => {
  for (let i = 0; i < 5; i++) await tick();
};

async function insert(store: MemoryGenerationStore, id: string): Promise<void> {
  await store.insert({ id, ownerId: 'alice', modelId: 'm', settings: {}, reserved: 1, createdAt: Date.now() });
}

describe('EventFeed', () => {
  it('reads no events while nobody watches, and a later watcher gets what is appended after it began', async () => {
    const store = new CountingStore();
    const feed = new EventFeed(options, store, new InProcessNotifier(), silentLogger);
    await feed.start();
    try {
      for (let i = 0; i < 5; i++) {
        await insert(store, `gen_unwatched_${i}`);
        feed.committed();
      }
      await settle();
      expect(store.readEventsCalls).toBe(0);
      expect(store.lastSeqCalls).toBeGreaterThan(1);
      const seen: GenerationEvent[] = [];
      const stop = feed.watch('gen_watched_1', (e) => seen.push(e));
      await insert(store, 'gen_watched_1');
      feed.committed();
      await settle();
      expect(seen.map((e) => [e.generationId, e.type])).toEqual([['gen_watched_1', 'created']]);
      // The read started at the end of the log: none of the earlier generations' events was read to get there.
      expect(store.readEventsCalls).toBe(1);
      stop();
    } finally {
      await feed.stop();
    }
  });

  it('a watcher that begins while the cursor is being moved still gets the events appended meanwhile', async () => {
    const store = new CountingStore();
    const feed = new EventFeed(options, store, new InProcessNotifier(), silentLogger);
    await feed.start();
    let release!: () => void;
    try {
      const before = store.lastSeqCalls;
      store.holdLastSeq = new Promise((r) => (release = r));
      await insert(store, 'gen_race_0');
      feed.committed();
      await settle();
      expect(store.lastSeqCalls).toBe(before + 1);
      // The store answered lastSeq() before this insert, but the answer arrives after the watcher began.
      const seen: GenerationEvent[] = [];
      feed.watch('gen_race_1', (e) => seen.push(e));
      await insert(store, 'gen_race_1');
      store.holdLastSeq = undefined;
      release();
      await settle();
      expect(seen.map((e) => [e.generationId, e.type])).toEqual([['gen_race_1', 'created']]);
    } finally {
      release?.();
      await feed.stop();
    }
  });

  it('makes one read for a burst of transitions in one turn of the event loop', async () => {
    const store = new CountingStore();
    const feed = new EventFeed(options, store, new InProcessNotifier(), silentLogger);
    await feed.start();
    try {
      let wakes = 0;
      feed.onWake(() => wakes++);
      for (let i = 0; i < 20; i++) {
        await insert(store, `gen_burst_${i}`);
        feed.committed();
      }
      await settle();
      expect(wakes).toBe(1);
    } finally {
      await feed.stop();
    }
  });
});
