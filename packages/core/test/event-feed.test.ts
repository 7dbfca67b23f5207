import { describe, expect, it } from 'vitest';
import { MemoryGenerationStore, type GenerationEvent } from '@genservice/core';
import type { FeedPage } from '@genservice/core/ports';
import { EventFeed, InProcessNotifier } from '../src/push/event-feed.js';
import { silentLogger } from '../src/logger.js';
import type { ResolvedServiceOptions } from '../src/resolved-options.js';
import { systemClock } from '../src/clock.js';
import { until } from '@genservice/testing';

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
      const stop = feed.watch('gen_burst_0', () => undefined);
      for (let i = 0; i < 20; i++) {
        await insert(store, `gen_burst_${i}`);
        feed.committed();
      }
      await settle();
      expect(wakes).toBe(1);
      expect(store.readFeedCalls).toBe(1);
      stop();
    } finally {
      await feed.stop();
    }
  });

  it('reads nothing while nobody watches (issue 36); its poll moves the cursor to the head, and a watcher then misses nothing', async () => {
    const store = new CountingStore();
    let heads = 0;
    const head = store.feedHead.bind(store);
    store.feedHead = () => (heads++, head());
    const feed = new EventFeed({ ...options, push: { pollIntervalMs: 10 } } as ResolvedServiceOptions, store, new InProcessNotifier(), silentLogger);
    await feed.start();
    try {
      let wakes = 0;
      feed.onWake(() => wakes++);
      for (let i = 0; i < 50; i++) {
        await insert(store, `gen_idle_${i}`);
        feed.committed();
        await tick();
      }
      await until(() => heads >= 3, { what: 'polls that read the head' });
      expect(wakes).toBeGreaterThan(0);
      expect(store.readFeedCalls).toBe(0);
      const seen: string[] = [];
      const stop = feed.watch('gen_idle_late', (e) => seen.push(e.type));
      await insert(store, 'gen_idle_late');
      feed.committed();
      await until(() => seen.length === 1, { what: 'the watched generation\'s created event' });
      expect(store.readFeedCalls).toBeGreaterThan(0);
      stop();
    } finally {
      await feed.stop();
    }
  });
});
