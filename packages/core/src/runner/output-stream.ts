import type { Logger } from '../ports/logger.js';
import type { GenerationOutputStream } from '../ports/provider.js';
import { asError } from '../logger.js';
import type { Clock, ClockTimer } from '../ports/clock.js';

/**
 * At most one write of partial output (an `output` event, and a `preview` event) per generation per this many ms:
 * what a provider reports in between is coalesced into the next write (text concatenated, the latest preview wins).
 */
export const OUTPUT_INTERVAL_MS = 250;

/** Where one run's partial output goes: the Lifecycle's events (and the blob store for a preview's bytes). */
export interface OutputSink {
  text(delta: string): Promise<unknown>;
  preview(bytes: Uint8Array, mimeType: string): Promise<unknown>;
}

/**
 * `ctx.output` of one run. The first report is written at once; later ones wait for the window (OUTPUT_INTERVAL_MS
 * after the previous write began) and for the previous write to finish, so a slow store never has more than one of
 * this run's writes in flight, and the log never gets more than 1000 / OUTPUT_INTERVAL_MS of them a second. Nothing is
 * written after `stop()`; `flush()` writes what is pending now (before the generation completes or is parked).
 * Holds nothing until the first report.
 */
export class OutputReporter implements GenerationOutputStream {
  private text = '';
  private image: { bytes: Uint8Array; mimeType: string } | undefined = undefined;
  private lastAt = Number.NEGATIVE_INFINITY;
  private timer: ClockTimer | undefined = undefined;
  private writing: Promise<void> | undefined = undefined;
  private stopped = false;
  /** Writes made (one per window with something in it); for tests and metrics. */
  writes = 0;

  constructor(
    private readonly sink: OutputSink,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

  readonly append = (text: string): void => {
    if (this.stopped || typeof text !== 'string' || text === '') return;
    this.text += text;
    this.schedule();
  };

  readonly preview = (bytes: Uint8Array, mimeType: string): void => {
    if (this.stopped || !(bytes instanceof Uint8Array) || typeof mimeType !== 'string' || mimeType === '') return;
    this.image = { bytes, mimeType };
    this.schedule();
  };

  stop(): void {
    this.stopped = true;
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.text = '';
    this.image = undefined;
  }

  /** Whether anything was reported and is not written yet (or a write is in flight): what `flush` would wait for. */
  get pending(): boolean {
    return this.writing !== undefined || this.timer !== undefined || this.text !== '' || this.image !== undefined;
  }

  /** Writes what is pending now, after the write in flight (the window does not apply); resolves when all are done. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.timer) this.clock.clearTimeout(this.timer);
      this.timer = undefined;
      if (this.writing) {
        await this.writing;
        continue;
      }
      if (this.stopped || (this.text === '' && !this.image)) return;
      this.write();
    }
  }

  private schedule(): void {
    if (this.timer || this.writing) return; // the timer, or the write's end, picks this report up
    const wait = this.lastAt + OUTPUT_INTERVAL_MS - this.clock.now();
    if (wait <= 0) return this.write();
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      if (!this.writing) this.write();
    }, wait);
  }

  private write(): void {
    if (this.stopped || (this.text === '' && !this.image)) return;
    this.lastAt = this.clock.now();
    this.writes++;
    const text = this.text;
    const image = this.image;
    this.text = '';
    this.image = undefined;
    this.writing = (async () => {
      try {
        if (text !== '') await this.sink.text(text);
        if (image) await this.sink.preview(image.bytes, image.mimeType);
      } catch (err) {
        this.log.warn({ err: asError(err) }, 'partial output not recorded');
      }
    })().finally(() => {
      this.writing = undefined;
      if (!this.stopped && (this.text !== '' || this.image)) this.schedule();
    });
  }
}
