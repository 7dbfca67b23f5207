import { inject, injectable } from 'tsyringe';
import { isTerminal, type GenerationEvent, type GenerationRecord } from '../domain.js';
import { DomainError } from '../errors.js';
import type { BaseUrl } from '../http/types.js';
import { GENERATION_ID_PATTERN } from '../ids.js';
import type { GenerationStore } from '../ports/store.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { Views } from '../views.js';
import { EventFeed } from './event-feed.js';

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
  /** Open streams, for the one keep-alive ticker. */
  private readonly streams = new Set<() => void>();
  private ticker: NodeJS.Timeout | undefined;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Store) private readonly store: GenerationStore,
    @inject(TOKENS.Feed) private readonly feed: EventFeed,
    @inject(TOKENS.Views) private readonly views: Views,
  ) {}

  private async owned(userId: string, generationId: string): Promise<GenerationRecord> {
    const rec = GENERATION_ID_PATTERN.test(generationId) ? await this.store.get(generationId, userId) : null;
    if (!rec) throw new DomainError('not_found', 'Generation not found.');
    return rec;
  }

  /**
   * Checks ownership (throws not_found before anything is streamed), then returns the stream: the current state, one
   * message per transition after it, a comment every keepAliveMs, and the end after the terminal event. With
   * `lastEventId`, first every event after that one.
   */
  async stream(userId: string, generationId: string, lastEventId: number | undefined, baseUrl?: BaseUrl): Promise<AsyncIterable<string>> {
    await this.owned(userId, generationId);
    const self = this;

    // Everything the stream holds is taken when it starts and released in its finally: a stream that is never read
    // (a HEAD request) holds nothing.
    async function* run(): AsyncGenerator<string> {
      // Watch before reading, so nothing committed in between is missed; what the reads below cover is skipped by seq.
      const pending: GenerationEvent[] = [];
      let wake: (() => void) | undefined;
      let keepAlive = false;
      const unwatch = self.feed.watch(generationId, (e) => {
        pending.push(e);
        wake?.();
      });
      const tick = (): void => {
        keepAlive = true;
        wake?.();
      };
      self.streams.add(tick);
      self.startTicker();
      try {
        const rec = await self.store.getById(generationId);
        if (!rec) return;
        const history = await self.store.eventsOf(generationId);
        const last = history[history.length - 1];
        let sent = last?.seq ?? 0;
        if (lastEventId !== undefined && last && lastEventId < last.seq) {
          // Resuming: every event the client missed, each with the generation as it is now.
          const item = self.views.item(rec, baseUrl);
          for (const e of history) if (e.seq > lastEventId) yield sse(e.seq, e.type, item);
        } else {
          yield sse(sent, last?.type ?? rec.status, self.views.item(rec, baseUrl));
        }
        if (isTerminal(rec.status)) return;
        for (;;) {
          if (pending.length === 0 && !keepAlive) await new Promise<void>((r) => (wake = r));
          wake = undefined;
          if (keepAlive) {
            keepAlive = false;
            yield ': keepalive\n\n';
          }
          const batch = pending.splice(0).filter((e) => e.seq > sent);
          if (batch.length === 0) continue;
          const now = await self.store.getById(generationId);
          if (!now) return; // deleted by retention while streaming
          const item = self.views.item(now, baseUrl);
          for (const e of batch) {
            sent = e.seq;
            yield sse(e.seq, e.type, item);
            if (e.type === 'completed' || e.type === 'failed') return;
          }
        }
      } finally {
        unwatch();
        self.streams.delete(tick);
        if (self.streams.size === 0) self.stopTicker();
      }
    }
    return run();
  }

  /**
   * Waits up to `seconds` for the generation to change status or finish; resolves with the record then (or as it is
   * when the time is up, or at once when it is already terminal).
   */
  async waitForChange(userId: string, generationId: string, seconds: number): Promise<GenerationRecord> {
    const first = await this.owned(userId, generationId);
    if (isTerminal(first.status) || seconds <= 0) return first;
    let unwatch: () => void = () => undefined;
    let timer: NodeJS.Timeout | undefined;
    const changed = new Promise<void>((resolve) => {
      // Only a status other than the one the caller saw counts (the feed may hand over an event from just before).
      unwatch = this.feed.watch(generationId, (e) => {
        if (e.type !== 'progress' && e.type !== 'created' && e.type !== first.status) resolve();
      });
      timer = setTimeout(resolve, seconds * 1000);
    });
    try {
      // It may have changed between the read and the watch: look once more before waiting.
      const again = await this.store.get(generationId, userId);
      if (!again || again.status !== first.status) return again ?? first;
      await changed;
    } finally {
      unwatch();
      clearTimeout(timer);
    }
    return (await this.store.get(generationId, userId)) ?? first;
  }

  private startTicker(): void {
    if (this.ticker) return;
    this.ticker = setInterval(() => {
      for (const tick of this.streams) tick();
    }, this.options.push.keepAliveMs);
    this.ticker.unref?.();
  }

  private stopTicker(): void {
    clearInterval(this.ticker);
    this.ticker = undefined;
  }

  /** Open streams; for tests and metrics. */
  get openStreams(): number {
    return this.streams.size;
  }
}
