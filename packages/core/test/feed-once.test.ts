// Issue 36, item 1: one wake-up reads the event log once for every listener. A watcher (streams and long-polls watch
// through EventFeed.watch) and the webhook outbox (default endpoints, so webhooks are in use) share the feed's read of
// a wake-up. Counted reads of the log, a FakeClock that is never advanced (no poll, no pump timer fires), no sleeps.
import { describe, expect, it } from 'vitest';
import { MemoryGenerationStore, MemoryWebhookStore, type GenerationRecord } from '@genservice/core';
import type { FeedPage, NewDelivery } from '@genservice/core/ports';
import { FakeClock, until } from '@genservice/testing';
import { EventFeed, InProcessNotifier } from '../src/push/event-feed.js';
import { WebhookOutbox } from '../src/push/webhook-outbox.js';
import { WebhookPump } from '../src/push/webhook-pump.js';
import type { WebhookSender } from '../src/push/webhook-sender.js';
import { WebhookUse } from '../src/push/webhook-use.js';
import type { Views } from '../src/use-cases/views.js';
import { silentLogger } from '../src/logger.js';
import type { ResolvedServiceOptions } from '../src/resolved-options.js';

/** Records every read of the log (its `after`), and the reads answered or failed; `failNext` reads reject. */
class CountingStore extends MemoryGenerationStore {
  readonly reads: string[] = [];
  answered = 0;
  failed = 0;
  failNext = 0;
  override async readFeed(after: string, limit: number): Promise<FeedPage> {
    this.reads.push(after);
    if (this.failNext > 0) {
      this.failNext--;
      this.failed++;
      throw new Error('the log is unavailable');
    }
    const page = await super.readFeed(after, limit);
    this.answered++;
    return page;
  }
}

class RecordingHooks extends MemoryWebhookStore {
  readonly added: NewDelivery[] = [];
  override async addDeliveries(deliveries: NewDelivery[]): Promise<void> {
    this.added.push(...deliveries);
    return super.addDeliveries(deliveries);
  }
}

const CURSOR = 'webhooks';

/**
 * The real EventFeed, WebhookOutbox, WebhookPump and WebhookUse on memory stores; webhooks in use through a default
 * endpoint; the sender and the views stubbed (what is sent is not the question here, what is written to the outbox is).
 * `n` generations are stored (pending) before it starts; `watched` of them are watched.
 */
async function rig(n: number) {
  const clock = new FakeClock();
  const store = new CountingStore();
  const hooks = new RecordingHooks();
  for (let i = 0; i < n; i++) {
    await store.insert({ id: `gen_${i}`, ownerId: 'alice', modelId: 'm', settings: {}, status: 'pending', reserved: 1, createdAt: clock.now() }, { type: 'created', data: {} });
  }
  const options = {
    clock,
    push: { pollIntervalMs: 1000 },
    webhooks: { pollIntervalMs: 1000, endpoints: async () => [{ url: 'https://receiver.test/hook', events: ['generation.completed'] }] },
  } as unknown as ResolvedServiceOptions;
  let sends = 0;
  const sender = { start() {}, deliver: () => void sends++, stop: async () => undefined } as unknown as WebhookSender;
  const views = { pushItem: (rec: GenerationRecord) => ({ id: rec.id, status: rec.status }) } as unknown as Views;
  const feed = new EventFeed(options, store, new InProcessNotifier(), silentLogger);
  const outbox = new WebhookOutbox(options, store, hooks, views, sender, silentLogger);
  const pump = new WebhookPump(options, feed, outbox, sender, new WebhookUse(options, hooks), silentLogger);
  let wakes = 0;
  feed.onWake(() => wakes++);
  await feed.start();
  pump.start();
  const head = await store.feedHead();
  // The pump's first pass reads the log from its new durable cursor to the head, where the feed starts: from here on
  // both readers are at the same cursor.
  await until(async () => (await hooks.getCursor(CURSOR)) === head, { what: 'the outbox cursor at the head' });
  const seen: string[] = [];
  const unwatch = Array.from({ length: n }, (_, i) => feed.watch(`gen_${i}`, (e) => seen.push(`${e.generationId} ${e.type}`)));
  return {
    clock,
    store,
    hooks,
    feed,
    seen,
    wakes: () => wakes,
    /** Appends gen_i's `completed` event (a transition committed), without waking anyone. */
    complete: async (i: number) => {
      const done = await store.update(`gen_${i}`, { expect: { status: ['pending'] }, set: { status: 'completed', finishedAt: clock.now() }, event: { type: 'completed', data: {} }, now: clock.now() });
      expect(done?.status).toBe('completed');
    },
    /** Both readers have what gen_i's completion gave them: the watcher its event, the outbox its delivery and cursor. */
    delivered: async (i: number) => {
      await until(() => seen.includes(`gen_${i} completed`), { what: `the watcher given gen_${i}'s completed event` });
      await until(() => hooks.added.some((d) => d.generationId === `gen_${i}` && d.type === 'generation.completed'), { what: `gen_${i}'s delivery in the outbox` });
      const at = await store.feedHead();
      await until(async () => (await hooks.getCursor(CURSOR)) === at, { what: 'the outbox cursor past it' });
    },
    stop: async () => {
      for (const u of unwatch) u();
      await pump.stop();
      await feed.stop();
    },
  };
}

describe('one wake-up reads the log once for every listener (issue 36)', () => {
  it('a watcher and the webhook outbox, 5 transitions each woken: exactly one readFeed per wake-up, and both get every event', async () => {
    const r = await rig(5);
    try {
      const base = r.store.reads.length;
      const wakesBefore = r.wakes();
      for (let i = 0; i < 5; i++) {
        const before = r.store.reads.length;
        await r.complete(i);
        r.feed.committed();
        await r.delivered(i);
        expect(r.store.reads.length - before).toBe(1);
      }
      expect(r.wakes() - wakesBefore).toBe(5);
      expect(r.store.reads.length - base).toBe(5);
      expect(r.seen).toEqual([0, 1, 2, 3, 4].map((i) => `gen_${i} completed`));
      expect(r.hooks.added.map((d) => d.generationId)).toEqual([0, 1, 2, 3, 4].map((i) => `gen_${i}`));
    } finally {
      await r.stop();
    }
  });

  it('a reader woken by a later wake-up is not handed a page read before it: an event committed between two turns is read on the second, without a poll', async () => {
    const r = await rig(1);
    try {
      const base = r.store.reads.length;
      const answered = r.store.answered;
      const at = await r.store.feedHead();
      // Wake-up 1 with nothing new (a spurious one, as another instance's may be): one shared read, empty.
      r.feed.committed();
      await until(() => r.store.answered === answered + 1, { what: 'the first wake-up\'s read answered' });
      expect(r.store.reads.slice(base)).toEqual([at]);
      // An event committed after that read; wake-up 2 must read again from the same cursor, for both readers.
      await r.complete(0);
      r.feed.committed();
      await r.delivered(0);
      expect(r.store.reads.slice(base)).toEqual([at, at]);
      expect(r.wakes()).toBeGreaterThanOrEqual(2);
      expect(r.clock.now()).toBe(new FakeClock().now()); // never advanced: no poll, no pump timer
    } finally {
      await r.stop();
    }
  });

  it('a shared read that failed fails both readers once, and the next wake-up reads again for both', async () => {
    const r = await rig(1);
    try {
      const base = r.store.reads.length;
      const at = await r.store.feedHead();
      await r.complete(0);
      r.store.failNext = 1;
      r.feed.committed();
      await until(() => r.store.failed === 1, { what: 'the failed read' });
      // Let both readers take the failure (they log it) before the next wake-up.
      await until(() => r.store.reads.length === base + 1 && r.seen.length === 0 && r.hooks.added.length === 0);
      r.feed.committed();
      await r.delivered(0);
      expect(r.store.reads.slice(base)).toEqual([at, at]);
      expect(r.seen).toEqual(['gen_0 completed']);
    } finally {
      await r.stop();
    }
  });
});

describe('EventFeed.page', () => {
  it('shares a read of the same cursor within a turn, never across turns, drops a failed one and keeps at most a few', async () => {
    const store = new CountingStore();
    const feed = new EventFeed({ clock: new FakeClock(), push: { pollIntervalMs: 1000 } } as unknown as ResolvedServiceOptions, store, new InProcessNotifier(), silentLogger);
    const first = feed.page('0');
    expect(feed.page('0')).toBe(first);
    await first;
    expect(feed.page('0')).toBe(first); // answered, same turn: still shared
    expect(store.reads).toEqual(['0']);
    feed.nextTurn();
    const second = feed.page('0');
    expect(second).not.toBe(first);
    expect(store.reads).toEqual(['0', '0']);
    store.failNext = 1;
    feed.nextTurn();
    const failing = feed.page('0');
    await expect(failing).rejects.toThrow('the log is unavailable');
    const retried = feed.page('0');
    expect(retried).not.toBe(failing);
    await expect(retried).resolves.toEqual({ events: [], cursor: '0' });
    expect(store.reads).toEqual(['0', '0', '0', '0']);
    // Bounded: the oldest of this turn's reads is let go once a few more cursors were read.
    for (let i = 1; i <= 4; i++) feed.page(String(i));
    expect(feed.page('0')).not.toBe(retried);
  });
});
