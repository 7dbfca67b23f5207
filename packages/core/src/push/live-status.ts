import { inject, injectable } from 'tsyringe';
import { isOutputEvent, isTerminal, type GenerationEvent, type GenerationRecord } from '../domain/types.js';
import { DomainError } from '../domain/errors.js';
import type { BaseUrl } from '../domain/types.js';
import { GENERATION_ID_PATTERN } from '../domain/ids.js';
import type { GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Views } from '../use-cases/views.js';
import { EventFeed } from './event-feed.js';
import type { ClockTimer } from '../ports/clock.js';
import { QueuePositions, type QueueInfo } from '../runner/queue-positions.js';

/**
 * Open streams and long-polls of the whole process: every service in it counts in the same table (a `Symbol.for` key,
 * so two copies of this module share it too), which makes `limits.streamsPerUser` exact across the instances of one
 * process. Each one is counted from the moment it is granted until it ends, once.
 */
interface LiveSlots {
  total: number;
  byUser: Map<string, number>;
}
const SLOTS_KEY = Symbol.for('genservice.liveSlots');
const slots: LiveSlots = ((globalThis as Record<symbol, LiveSlots | undefined>)[SLOTS_KEY] ??= { total: 0, byUser: new Map() });

/** Seconds a refused stream or long-poll is told to wait: long enough for one of its kind to end or be closed. */
const SLOT_RETRY_SECONDS = 5;

/** The record, or not_found when there is none (not, or no longer, the caller's to read). */
function present(rec: GenerationRecord | null): GenerationRecord {
  if (!rec) throw new DomainError('not_found', 'Generation not found.');
  return rec;
}

/** One Server-Sent Events message (every `data` line is one line: JSON has no raw newlines). */
function sse(seq: number, type: string, data: unknown): string {
  return `id: ${seq}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * Live status of one generation: the event stream (`GET /v1/generations/:id/events`) and the long-poll
 * (`Prefer: wait=N`). Both watch the generation on the instance's EventFeed, so they hold no store connection while
 * they wait, and both see transitions made on other instances (through the notifier, or the feed's polling).
 */
@injectable()
export class LiveStatus {
  /** Open streams, for the one keep-alive ticker (and `closeAll`). */
  private readonly streams = new Set<EventStream>();
  private ticker: ClockTimer | undefined;
  private checks: Promise<boolean> = Promise.resolve(true);

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(EventFeed) private readonly feed: EventFeed,
    @inject(Views) private readonly views: Views,
    @inject(QueuePositions) private readonly positions: QueuePositions,
  ) {}

  /**
   * Takes one of the user's stream slots (and one of the process's), or throws `rate_limited` (the user's are all
   * taken) or `unavailable` (the process's are). Returns the release, which frees them once however often it is called.
   */
  private takeSlot(userId: string): () => void {
    const { streamsPerUser, streamsTotal } = this.options.limits;
    const mine = slots.byUser.get(userId) ?? 0;
    if (mine >= streamsPerUser) {
      throw new DomainError(
        'rate_limited',
        `At most ${streamsPerUser} event streams and long-polls may be open at once per user; close one first.`,
        { retryAfterSeconds: SLOT_RETRY_SECONDS },
      );
    }
    if (slots.total >= streamsTotal) {
      throw new DomainError('unavailable', 'The server holds as many event streams and long-polls as it allows; try again shortly.', {
        retryAfterSeconds: SLOT_RETRY_SECONDS,
      });
    }
    slots.byUser.set(userId, mine + 1);
    slots.total++;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      slots.total--;
      const left = (slots.byUser.get(userId) ?? 1) - 1;
      if (left > 0) slots.byUser.set(userId, left);
      else slots.byUser.delete(userId);
    };
  }

  /**
   * One of the user's stream slots for a request that waits on its generations several times (the OpenAI surface's
   * held requests): taken before it starts anything, so a user whose slots are all taken is refused before a generation
   * is made and charged. Throws as `takeSlot`; the caller releases it when its waiting is over.
   */
  holdSlot(userId: string): () => void {
    return this.takeSlot(userId);
  }

  private async owned(userId: string, generationId: string): Promise<GenerationRecord> {
    return present(GENERATION_ID_PATTERN.test(generationId) ? await this.store.get(generationId, userId) : null);
  }

  /**
   * Checks ownership (throws not_found before anything is streamed), then returns the stream: the current state, one
   * message per transition after it, a comment every keepAliveMs, and the end after the terminal event. With
   * `lastEventId`, first every event after that one.
   */
  async stream(userId: string, generationId: string, lastEventId: number | undefined, baseUrl?: BaseUrl): Promise<AsyncIterable<string>> {
    await this.owned(userId, generationId);
    // Held from here until the stream ends (its generation finished, the client left, or a HEAD returned it).
    return new EventStream(this, generationId, lastEventId, baseUrl, this.takeSlot(userId));
  }

  /** @internal The parts an EventStream needs. */
  get parts(): {
    store: GenerationStore;
    feed: EventFeed;
    views: Views;
    positions: QueuePositions;
    options: ResolvedServiceOptions;
    streams: Set<EventStream>;
    startTicker: () => void;
    stopTicker: () => void;
  } {
    return {
      store: this.store,
      feed: this.feed,
      views: this.views,
      positions: this.positions,
      options: this.options,
      streams: this.streams,
      startTicker: () => this.startTicker(),
      stopTicker: () => this.stopTicker(),
    };
  }

  /**
   * Waits up to `seconds` for the generation to change status or finish (with `output`, also for new partial output);
   * resolves with the record then (or as it is when the time is up, or at once when it is already terminal). With
   * `slotHeld`, the caller already holds a slot for this wait (`holdSlot`) and no other is taken.
   */
  async waitForChange(userId: string, generationId: string, seconds: number, output = false, slotHeld = false): Promise<GenerationRecord> {
    const first = await this.owned(userId, generationId);
    if (isTerminal(first.status) || seconds <= 0) return first;
    const release = slotHeld ? () => undefined : this.takeSlot(userId);
    let unwatch: () => void = () => undefined;
    let timer: ClockTimer | undefined;
    const changed = new Promise<void>((resolve) => {
      // Only a status other than the one the caller saw counts (the feed may hand over an event from just before).
      unwatch = this.feed.watch(generationId, (e) => {
        if (isOutputEvent(e.type) ? output : e.type !== 'progress' && e.type !== 'created' && e.type !== first.status) resolve();
      });
      timer = this.options.clock.setTimeout(resolve, seconds * 1000);
    });
    try {
      // It may have changed between the read and the watch: look once more before waiting.
      const again = present(await this.store.get(generationId, userId));
      if (again.status !== first.status) return again;
      await changed;
    } finally {
      unwatch();
      this.options.clock.clearTimeout(timer);
      release();
    }
    // Deleted (or expired) while it waited: answered as a read of it now is.
    return present(await this.store.get(generationId, userId));
  }

  startTicker(): void {
    if (this.ticker) return;
    this.ticker = this.options.clock.setInterval(() => {
      for (const stream of this.streams) stream.tick();
    }, this.options.push.keepAliveMs);
    this.ticker.unref?.();
  }

  stopTicker(): void {
    this.options.clock.clearInterval(this.ticker);
    this.ticker = undefined;
  }

  /** Whether a streamed generation is still stored (a failed read: yes); one read at a time, not a pool's worth. */
  exists(generationId: string): Promise<boolean> {
    return (this.checks = this.checks.then(() => this.store.getById(generationId)).then((r) => r !== null, () => true));
  }

  /** Ends every open stream (`service.stop()`): each client sees its end, and reconnects (with Last-Event-ID) elsewhere. */
  closeAll(): void {
    for (const stream of [...this.streams]) void stream.return();
  }

  /** Open streams; for tests and metrics. */
  get openStreams(): number {
    return this.streams.size;
  }
}

/**
 * One live stream, as an async iterator whose `return()` takes effect at once, even while a `next()` waits (an async
 * generator would queue it behind that `next()` until the next event or keep-alive). Everything it holds (its watch on
 * the feed, its keep-alive tick) is taken on the first `next()` and released by `return()` or its end: a stream that is
 * never read (HEAD) holds nothing.
 */
class EventStream implements AsyncIterableIterator<string> {
  private started = false;
  private closed = false;
  private readonly outbox: string[] = [];
  private readonly pending: GenerationEvent[] = [];
  private wake: (() => void) | undefined;
  private keepAlive = false;
  private sent = 0;
  private finishing = false;
  private unwatch: (() => void) | undefined;
  readonly tick = (): void => {
    this.keepAlive = true;
    this.wake?.();
  };
  /** While the generation waits in the queue: the timer that asks for its position, and the last one sent. */
  private queueTimer: ClockTimer | undefined;
  private queueDue = false;
  private lastQueue: QueueInfo | undefined;

  constructor(
    private readonly live: LiveStatus,
    private readonly generationId: string,
    private readonly lastEventId: number | undefined,
    private readonly baseUrl: BaseUrl | undefined,
    private readonly release: () => void,
  ) {}

  [Symbol.asyncIterator](): AsyncIterableIterator<string> {
    return this;
  }

  private async begin(): Promise<void> {
    const { feed, store, views, streams, startTicker } = this.live.parts;
    // Watch before reading, so nothing committed in between is missed; what the reads cover is skipped by seq.
    this.unwatch = feed.watch(this.generationId, (e) => {
      this.pending.push(e);
      this.wake?.();
    });
    streams.add(this);
    startTicker();
    // The log first, then the record: a transition committed between the two is in the record (at least as new as
    // the log) and comes through the watch (its seq is past the log's), never in the log with an older record.
    const history = await store.eventsOf(this.generationId);
    const rec = await store.getById(this.generationId);
    if (!rec) return this.finish();
    const last = history[history.length - 1];
    this.sent = last?.seq ?? 0;
    if (this.lastEventId !== undefined && last && this.lastEventId < last.seq) {
      // Resuming: every event the client missed, each with the generation as it is now (partial output as it was sent).
      const item = views.item(rec, this.baseUrl);
      for (const e of history) if (e.seq > this.lastEventId) this.outbox.push(this.message(e, rec, item));
      // Still waiting: its place comes with the first `queue` message.
      if (rec.status === 'pending') this.watchQueue();
    } else {
      // The state, then (while it runs and unless resuming) the partial output so far as one output and one preview
      // message. The state's id is before the first partial output, so a client that got only the state and resumes
      // from it is sent that output again rather than never.
      let state: GenerationEvent | undefined;
      let firstOutput: number | undefined;
      for (const e of history) {
        if (!isOutputEvent(e.type)) state = e;
        else firstOutput ??= e.seq;
      }
      const partial = isTerminal(rec.status) || this.lastEventId !== undefined ? undefined : views.partial(rec, history, this.baseUrl);
      const stateId = partial && firstOutput !== undefined ? Math.min(this.sent, firstOutput - 1) : this.sent;
      const item = views.item(rec, this.baseUrl);
      if (rec.status === 'pending') await this.followQueue(item);
      this.outbox.push(sse(stateId, state?.type ?? rec.status, item));
      if (partial?.text !== undefined) this.outbox.push(sse(this.sent, 'output', { delta: partial.text }));
      if (partial?.preview) this.outbox.push(sse(this.sent, 'preview', partial.preview));
    }
    // It ends with the terminal event: one the log read does not have yet is still to come through the watch.
    const ended = history.length === 0 || history.some((e) => e.type === 'completed' || e.type === 'failed');
    if (isTerminal(rec.status) && ended) this.finishing = true;
  }

  async next(): Promise<IteratorResult<string>> {
    if (!this.started) {
      this.started = true;
      await this.begin();
    }
    for (;;) {
      if (this.outbox.length > 0) return { done: false, value: this.outbox.shift()! };
      if (this.closed || this.finishing) {
        this.finish();
        return { done: true, value: undefined };
      }
      if (this.pending.length === 0 && !this.keepAlive && !this.queueDue) await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
      if (this.closed) continue;
      if (this.keepAlive) {
        this.keepAlive = false;
        this.outbox.push(': keepalive\n\n');
        // A deleted generation's log goes with it, often before a feed read its cancel: looked for at each keep-alive.
        void this.live.exists(this.generationId).then((there) => void (there || this.return()));
      }
      if (this.queueDue) {
        this.queueDue = false;
        await this.queueMessage();
      }
      const batch = this.pending.splice(0).filter((e) => e.seq > this.sent);
      if (batch.length === 0) continue;
      // Text deltas carry all they say; anything else is shown with the generation as it is now (one read).
      let now: GenerationRecord | null | undefined;
      if (batch.some((e) => e.type !== 'output')) {
        now = await this.live.parts.store.getById(this.generationId);
        if (!now) {
          this.finishing = true; // deleted by retention while streaming
          continue;
        }
      }
      const item = now ? this.live.parts.views.item(now, this.baseUrl) : undefined;
      for (const e of batch) {
        // It left the queue: no more positions.
        if (e.type !== 'created' && e.type !== 'progress' && !isOutputEvent(e.type)) this.stopQueue();
        this.sent = e.seq;
        this.outbox.push(this.message(e, now ?? undefined, item));
        if (e.type === 'completed' || e.type === 'failed') {
          this.finishing = true;
          break;
        }
      }
    }
  }

  /**
   * A pending generation's first position goes into the state message's item (`queue`); then, every
   * `push.queuePositionIntervalMs`, a `queue` message when it moved. Only ever smaller: another tenant's job that
   * arrives later may be handed out first (the fair order), which this stream shows as no move rather than a step back.
   */
  private async followQueue(item: { queue?: QueueInfo }): Promise<void> {
    const info = await this.live.parts.positions.of(this.generationId);
    if (info) {
      item.queue = info;
      this.lastQueue = info;
    }
    this.watchQueue();
  }

  /** Asks for the position every `push.queuePositionIntervalMs` until the generation leaves the queue. */
  private watchQueue(): void {
    const { options, positions } = this.live.parts;
    if (!positions.available) return;
    this.queueTimer = options.clock.setInterval(() => {
      this.queueDue = true;
      this.wake?.();
    }, options.push.queuePositionIntervalMs);
    this.queueTimer.unref?.();
  }

  private async queueMessage(): Promise<void> {
    if (!this.queueTimer) return;
    const info = await this.live.parts.positions.of(this.generationId);
    if (!info || !this.queueTimer) return;
    const last = this.lastQueue;
    const shown = last && info.aheadOfYou > last.aheadOfYou ? { ...info, aheadOfYou: last.aheadOfYou, position: last.position } : info;
    if (last && shown.aheadOfYou === last.aheadOfYou && shown.etaSeconds === last.etaSeconds) return;
    this.lastQueue = shown;
    this.outbox.push(sse(this.sent, 'queue', shown));
  }

  private stopQueue(): void {
    if (!this.queueTimer) return;
    this.live.parts.options.clock.clearInterval(this.queueTimer);
    this.queueTimer = undefined;
    this.queueDue = false;
  }

  /** One event as a message: partial output as itself (`{ delta }`, `{ url, mimeType }`), a transition with the item. */
  private message(e: GenerationEvent, rec: GenerationRecord | undefined, item: unknown): string {
    if (e.type === 'output') return sse(e.seq, 'output', { delta: e.data.delta });
    if (e.type === 'preview') return sse(e.seq, 'preview', this.live.parts.views.preview(e, rec!, this.baseUrl));
    return sse(e.seq, e.type, item);
  }

  async return(): Promise<IteratorResult<string>> {
    this.closed = true;
    this.outbox.length = 0;
    this.finish();
    this.wake?.();
    return { done: true, value: undefined };
  }

  private finish(): void {
    this.closed = true;
    this.stopQueue();
    this.release();
    this.unwatch?.();
    this.unwatch = undefined;
    const { streams, stopTicker } = this.live.parts;
    if (streams.delete(this) && streams.size === 0) stopTicker();
  }
}
