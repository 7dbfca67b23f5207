import { describe, expect, it } from 'vitest';
import { MemoryGenerationStore, type GenerationEvent } from '@genservice/core';
import type { FeedPage } from '@genservice/core/ports';
import { EventFeed, InProcessNotifier } from '../src/push/event-feed.js';
import { silentLogger } from '../src/logger.js';
import type { ResolvedServiceOptions } from '../src/resolved-options.js';
import { systemClock } from '../src/clock.js';

/** Counts the feed's reads of the log. */
class CountingStore extends MemoryGenerationStore {
  readFeedCalls = 0;
  override async readFeed(after: string, limit: number): Promise<FeedPage> {
    this.readFeedCalls++;
    return super.readFeed(after, limit);
  }
}

const options = { clock: systemClock, push: { pollIntervalMs: 60_000 } } as unknown as ResolvedServiceOptions;
const tick = () => new Promise((r) => setImmediate(r));
const settle = async () => {
  for (let i = 0; i < 5; i++) await tick();
};

async function insert(store: MemoryGenerationStore, id: string): Promise<void> {
  await store.insert({ id, ownerId: 'alice', modelId: 'm', settings: {}, status: 'pending', reserved: 1, createdAt: Date.now() }, { type: 'created', data: { modelId: 'm' } });
}

describe('EventFeed', () => {
  it('a watcher that begins after a quiet stretch gets the events appended after it began, and only those of its generation', async () => {
    const store = new CountingStore();
    const feed = new EventFeed(options, store, new InProcessNotifier(), silentLogger);
    await feed.start();
    try {
      for (let i = 0; i < 5; i++) {
        await insert(store, `gen_unwatched_${i}`);
        feed.committed();
      }
      await settle();
      const seen: GenerationEvent[] = [];
      const stop = feed.watch('gen_watched_1', (e) => seen.push(e));
      await insert(store, 'gen_watched_1');
      await insert(store, 'gen_unwatched_9');
      feed.committed();
      await settle();
      expect(seen.map((e) => [e.generationId, e.type])).toEqual([['gen_watched_1', 'created']]);
      stop();
    } finally {
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
      expect(store.readFeedCalls).toBe(1);
    } finally {
      await feed.stop();
    }
  });
});
