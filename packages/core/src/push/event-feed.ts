import { inject, injectable } from 'tsyringe';
import type { GenerationEvent } from '../domain/types.js';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { Notifier } from '../ports/notifier.js';
import type { FeedPage, GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import type { ClockTimer } from '../ports/clock.js';

export type EventListener = (event: GenerationEvent) => void;

/** Events per read of the log, for every reader of it (`EventFeed.page`): a page this long may have more after it. */
export const FEED_PAGE = 1000;
/** Reads of the log `page` keeps for sharing within one turn (a reader or two, each a page or two into a backlog). */
const SHARED_PAGES = 4;

/**
 * This instance's one reader of the event log. Live streams and long-polls watch a generation here instead of each
 * polling the store: one read of the log serves every watcher, so an idle stream costs a map entry.
 *
 * It reads when woken (a transition on this instance, or the notifier for another instance's), and every
 * `push.pollIntervalMs`, so a lost wake-up costs latency, never an event. A watcher may be handed an event appended
 * just before it began watching: watchers skip what they already know by `seq` or status. Other readers (webhook
 * delivery) may subscribe to every wake-up, and read through `page`, so one wake-up reads the log once for all of them.
 */
@injectable()
export class EventFeed {
  private readonly logger: Logger;
  private readonly watchers = new Map<string, Set<EventListener>>();
  private readonly wakeListeners = new Set<() => void>();
  private cursor = '';
  private started = false;
  private reading: Promise<void> | undefined;
  private again = false;
  private timer: ClockTimer | undefined;
  private watching = 0;
  /** Counts `watch` calls: a head read that a watcher overlapped does not move the cursor (`poll`). */
  private watchEpoch = 0;
  /** The reads of this turn by their `from` (`page`); emptied by `nextTurn`. */
  private readonly pages = new Map<string, Promise<FeedPage>>();

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Notifier) private readonly notifier: Notifier,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'event-feed' });
  }

  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.cursor = await this.store.feedHead();
    await this.notifier.start(() => this.wake());
    // Always, not only while someone watches: a cursor left behind while nobody watched would make the first new
    // watcher wait for a backlog of other generations' events.
    this.timer = this.options.clock.setInterval(() => this.poll(), this.options.push.pollIntervalMs);
    this.timer.unref?.();
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    this.options.clock.clearInterval(this.timer);
    await this.notifier.stop();
    await this.reading;
    this.nextTurn();
  }

  private wakeScheduled = false;
  private readonly scheduledWake = (): void => {
    this.wakeScheduled = false;
    this.wake();
  };

  /**
   * A transition was committed on this instance: read soon, and tell the other instances. One wake-up per turn of the
   * event loop (setImmediate, after the I/O it is handling): every transition of that turn (the requests that arrived
   * together, and the runs they started, which with in-memory ports go from created to completed within it) makes
   * one read of the log and one outbox pass, not one each.
   */
  committed(): void {
    if (!this.wakeScheduled) {
      this.wakeScheduled = true;
      setImmediate(this.scheduledWake);
    }
    this.notifier.publish();
  }

  /** Called for every wake-up (local or remote), before the feed reads. */
  onWake(listener: () => void): () => void {
    this.wakeListeners.add(listener);
    return () => this.wakeListeners.delete(listener);
  }

  private wake(): void {
    this.nextTurn();
    for (const l of this.wakeListeners) {
      try {
        l();
      } catch (err) {
        this.logger.warn({ err: asError(err) }, 'wake listener failed');
      }
    }
    this.read();
  }

  /** Calls `listener` with every event of this generation appended from now on, until the returned function is called. */
  watch(generationId: string, listener: EventListener): () => void {
    let set = this.watchers.get(generationId);
    if (!set) {
      set = new Set();
      this.watchers.set(generationId, set);
    }
    set.add(listener);
    this.watching++;
    this.watchEpoch++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.watching--;
      const s = this.watchers.get(generationId);
      s?.delete(listener);
      if (s && s.size === 0) this.watchers.delete(generationId);
    };
  }

  /**
   * Every `push.pollIntervalMs`: a read while someone watches; while nobody does, the cursor moves to the store's feed
   * head instead (one small query, no event read). That head is below every transaction still running, so an event
   * that commits later is after it; one committed before is in the store when a watcher that comes later reads it
   * there (a watcher watches, then reads the store). A watcher that came while the head was being read (the epoch
   * moved) keeps the cursor where it was: the next read covers it.
   */
  private poll(): void {
    this.nextTurn();
    if (this.watching > 0 || this.reading) {
      this.read();
      return;
    }
    const epoch = this.watchEpoch;
    this.reading = this.store
      .feedHead()
      .then((head) => {
        if (this.watchEpoch === epoch && this.watching === 0) this.cursor = head;
      })
      .catch((err: unknown) => this.logger.warn({ err: asError(err) }, 'reading the event log head failed; the next poll retries'))
      .finally(() => {
        this.reading = undefined;
        if (this.again) this.read();
      });
  }

  /**
   * One page of the log after `from` (at most `FEED_PAGE` events), shared by every reader woken by the same trigger:
   * a read of the same `from` begun in this turn is answered by the same promise, so a wake-up reads the log once for
   * the watchers and the webhook outbox when their cursors agree (they do in steady state: a cursor is the last
   * event's position). A turn begins at every wake-up (before its listeners run), every poll, and every `nextTurn`,
   * so no reader is handed a page begun before the trigger that woke it (an event committed in between would wait
   * for the next one). A read that failed is not shared again: the next call reads anew.
   */
  page(from: string): Promise<FeedPage> {
    const shared = this.pages.get(from);
    if (shared) return shared;
    // An async function, so a store that throws instead of rejecting fails this read like a rejection.
    const read = (async () => this.store.readFeed(from, FEED_PAGE))();
    if (this.pages.size >= SHARED_PAGES) this.pages.delete(this.pages.keys().next().value!);
    this.pages.set(from, read);
    read.catch(() => {
      if (this.pages.get(from) === read) this.pages.delete(from);
    });
    return read;
  }

  /**
   * A new trigger to read the log (a reader's own timer, such as the webhook pump's): reads begun before it are no
   * longer shared (`page`).
   */
  nextTurn(): void {
    this.pages.clear();
  }

  /**
   * Reads the feed past the cursor; calls made while a read runs make it read once more after, never in parallel.
   * Nobody watching, a wake-up reads nothing (issue 36: no feed read when nothing can listen); the poll keeps the
   * cursor near the head meanwhile (`poll`), and the first read after a watcher came starts from there.
   */
  read(): void {
    if (!this.started) return;
    if (this.watching === 0 && !this.reading) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        try {
          for (;;) {
            const { events, cursor } = await this.page(this.cursor);
            this.cursor = cursor;
            for (const e of events) {
              const set = this.watchers.get(e.generationId);
              if (set) for (const l of [...set]) l(e);
            }
            if (events.length < FEED_PAGE) break;
          }
        } catch (err) {
          this.logger.warn({ err: asError(err) }, 'reading the event log failed; the next wake-up or poll retries');
        }
      } while (this.again && this.started);
    })().finally(() => {
      this.reading = undefined;
    });
  }

  /** Watchers right now; for tests and metrics. */
  get size(): number {
    return this.watching;
  }
}

/**
 * The default notifier, for one process: there is no other instance to tell (the feed wakes itself on its own
 * transitions). Instances that share a store need a shared channel (`RedisNotifier`, `PostgresNotifier`); without one
 * they still see each other's transitions, `push.pollIntervalMs` later.
 */
export class InProcessNotifier implements Notifier {
  async start(): Promise<void> {}
  publish(): void {}
  async stop(): Promise<void> {}
}
