import type { EnqueueOptions, Job, JobHandler, JobQueue, QueuePosition, QueueStopOptions, RunnerSettings } from '../ports/queue.js';
import { fairLineOf, fairOrder, fairTagUnits, tagOfOrder, type FairLine } from '../domain/fair-order.js';
import { systemClock } from '../clock.js';
import { JobAbort } from './job-signal.js';
import { before, Heap, Slots, type Waiting } from './in-process-slots.js';
import type { Clock, ClockTimer } from '../ports/clock.js';

export interface InProcessQueueOptions {
  /** Jobs running at once over all models. Default: the service's `runner.concurrency`. */
  concurrency?: number;
  /** Jobs of one model running at once; undefined means only the global limit applies. Default: each model's `concurrency`. */
  modelConcurrency?: (modelId: string) => number | undefined;
  /**
   * Jobs kept while the queue is not started (an API-only instance never starts it). Beyond this they are not kept:
   * they stay `pending` in the store and recovery enqueues them when a worker starts. Default 10 000.
   */
  backlogLimit?: number;
  /** The clock of delayed jobs and of the stop's wait. Default: the system clock (the service gives its own to the queue it makes). */
  clock?: Clock;
}

/** A provider lane on this instance: its slots (the lane's `concurrency` here, paused while an upstream asked to wait). */
interface LaneSlots {
  queue: Slots;
  /** When a pause ends, and its timer. */
  pausedUntil: number;
  timer?: ClockTimer;
}

/**
 * The embedded runner, in this process. Waiting jobs live in memory only; the store still holds them as `pending`,
 * and recovery enqueues them again on the next start, so a stop or crash loses none.
 *
 * Fair: waiting jobs are handed out in the fair order of `domain/fair-order.ts` (weighted across organisations,
 * round-robin across their users, `high` before `normal`, `low` only when nothing else waits), the same order the
 * durable queues keep. A model's `concurrency` limits its jobs further: the jobs of a model at its limit are skipped
 * until a slot of it frees, not waited on.
 *
 * The slots are counters (`Slots`): one for the global concurrency, one per model that has a limit, and one per provider
 * lane (`RunnerSettings.laneOf`: the lane's `concurrency` on this instance, paused by `pauseLane` while its upstream
 * asked to wait, started again on the clock). The fair choice of which job goes next is made here; a job starts when it
 * holds a slot of each limit that applies, and gives them back when its handler settles.
 */
export class InProcessQueue implements JobQueue {
  private concurrency: number;
  private modelConcurrency: ((modelId: string) => number | undefined) | undefined;
  /**
   * Waiting jobs by band (0, 1), then model. A heap that empties is kept for its model's next job (one per band and
   * model: few), rather than a new heap, its array and its key made for every job that finds the queue empty (issue 36).
   */
  private readonly heaps: [Map<string, Heap>, Map<string, Heap>] = [new Map(), new Map()];
  private readonly waiting = new Map<string, Waiting>();
  /** Waiting counts by line, member and tenant (users with work waiting), as the durable queues keep them. */
  private readonly counts = new Map<string, number>();
  private seq = 0;
  /** The plain lines of owners (`lineOf`), kept for at most 10 000 owners at a time. */
  private readonly plainLines = new Map<string, FairLine>();
  /** Running jobs by generation id, with the signal each was handed (a JobAbort: no AbortController per job). */
  private readonly running = new Map<string, JobAbort>();
  /** Every running job holds one of these slots. Paused until `start`, and again from `stop`. */
  private readonly slots = new Slots(8);
  /** The slots of each model with a `concurrency` of its own. */
  private readonly modelSlots = new Map<string, Slots>();
  /** Each provider lane's slots on this instance (`RunnerSettings.laneOf`). */
  private readonly laneSlots = new Map<string, LaneSlots>();
  private laneOf: RunnerSettings['laneOf'];
  private handler: JobHandler | undefined;
  private stopped = false;
  private started = false;
  /** Delayed jobs (a remote job's next check), by generation id: one timer each, replaced by a newer delay. */
  private readonly delayed = new Map<string, ClockTimer>();
  private readonly clock: Clock;

  constructor(private readonly options: InProcessQueueOptions = {}) {
    this.concurrency = options.concurrency ?? 8;
    this.modelConcurrency = options.modelConcurrency;
    this.clock = options.clock ?? systemClock;
  }

  async enqueue(job: Job, options: EnqueueOptions = {}): Promise<void> {
    if (options.delayMs !== undefined && options.delayMs > 0) {
      // Kept in this process only: the store's parkedUntil is what recovery reschedules from after a restart.
      this.clock.clearTimeout(this.delayed.get(job.generationId));
      const timer = this.clock.setTimeout(() => {
        this.delayed.delete(job.generationId);
        void this.enqueue(job);
      }, options.delayMs);
      timer.unref?.();
      this.delayed.set(job.generationId, timer);
      return;
    }
    if (this.waiting.has(job.generationId) || this.running.has(job.generationId)) return;
    if (!this.started && this.waiting.size >= (this.options.backlogLimit ?? 10_000)) return;
    // Due now, it replaces a later turn of the same generation (a job the capacity gate woke before its poll): that
    // turn would only find it claimed, after asking the lane again.
    const later = this.delayed.get(job.generationId);
    if (later) {
      this.clock.clearTimeout(later);
      this.delayed.delete(job.generationId);
    }
    const line = this.lineOf(job);
    const v = this.virtualTime(line.band);
    const place = this.count(line.line, 1);
    if (this.count(line.member, 1) === 1) this.count(line.tenant, 1);
    const members = this.counts.get(line.tenant) ?? 1;
    const order = fairOrder(fairTagUnits(v, place, members, line.weight), line.rank);
    const w: Waiting = { job, line, order, seq: this.seq++ };
    this.waiting.set(job.generationId, w);
    const heaps = this.heaps[line.band];
    let heap = heaps.get(job.modelId);
    if (!heap) {
      heap = new Heap();
      heaps.set(job.modelId, heap);
    }
    heap.push(w);
    this.pumpSoon();
  }

  private pumpScheduled = false;
  private readonly scheduledPump = (): void => {
    this.pumpScheduled = false;
    this.pump();
  };

  /**
   * New jobs start once per turn of the event loop (setImmediate), after the I/O it is handling: the requests that
   * arrived together are answered first, then their runs start together, as a hand-written server schedules them
   * (issue 36). Only while every waiting job fits the free slots: once more wait than could start, those that fit
   * start now, so a burst (a loop of creates that never yields) keeps as few waiting as it did, instead of holding the
   * whole burst back until it ends. A freed slot starts the next waiting job at once (`run`'s `finished`).
   */
  private pumpSoon(): void {
    if (this.waiting.size >= this.slots.free) return this.pump();
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(this.scheduledPump);
  }

  /**
   * The job's line. A job without an organisation or a priority (no organisations, no priorities asked) waits in its
   * owner's plain line, whose keys are made once per owner, not three strings per job (issue 36).
   */
  private lineOf(job: Job): FairLine {
    if (job.organizationId !== undefined || job.priority !== undefined || job.ownerId === undefined) return fairLineOf(job);
    let line = this.plainLines.get(job.ownerId);
    if (line === undefined) {
      if (this.plainLines.size >= 10_000) this.plainLines.clear();
      line = fairLineOf(job);
      this.plainLines.set(job.ownerId, line);
    }
    return line;
  }

  /** The band's virtual time: the smallest tag among its waiting jobs (0 when none waits). */
  private virtualTime(band: 0 | 1): number {
    let v: number | undefined;
    for (const heap of this.heaps[band].values()) {
      const head = heap.head;
      if (head) v = Math.min(v ?? Number.POSITIVE_INFINITY, tagOfOrder(head.order));
    }
    return v ?? 0;
  }

  /** Adds `by` to a count and answers the new value; a count that reaches 0 is dropped. */
  private count(key: string, by: number): number {
    const n = (this.counts.get(key) ?? 0) + by;
    if (n <= 0) this.counts.delete(key);
    else this.counts.set(key, n);
    return n;
  }

  /** The job leaves its line: its line's, member's and tenant's counts go down. */
  private leave(w: Waiting): void {
    this.waiting.delete(w.job.generationId);
    this.count(w.line.line, -1);
    if (this.count(w.line.member, -1) === 0) this.count(w.line.tenant, -1);
  }

  /** The slots of a model with a limit of its own; undefined when only the global limit applies. */
  private slotsOf(modelId: string): Slots | undefined {
    const limit = this.modelConcurrency?.(modelId);
    if (!limit) return undefined;
    let q = this.modelSlots.get(modelId);
    if (!q) {
      q = new Slots(limit);
      this.modelSlots.set(modelId, q);
    } else if (q.concurrency !== limit) q.concurrency = limit;
    return q;
  }

  /** A lane's slots on this instance (made on first use), with the lane's current concurrency. */
  private lane(name: string, concurrency?: number): LaneSlots {
    let l = this.laneSlots.get(name);
    if (!l) {
      l = { queue: new Slots(concurrency ?? Number.POSITIVE_INFINITY), pausedUntil: 0 };
      this.laneSlots.set(name, l);
    } else if (concurrency !== undefined && l.queue.concurrency !== concurrency) l.queue.concurrency = concurrency;
    return l;
  }

  /** The lane slots of a job's model, when it has a lane. */
  private slotsOfLane(modelId: string): Slots | undefined {
    const lane = this.laneOf?.(modelId);
    return lane ? this.lane(lane.lane, lane.concurrency).queue : undefined;
  }

  pauseLane(lane: string, ms: number): void {
    const l = this.lane(lane);
    const until = this.clock.now() + ms;
    if (until <= l.pausedUntil) return;
    l.pausedUntil = until;
    l.queue.paused = true;
    this.clock.clearTimeout(l.timer);
    l.timer = this.clock.setTimeout(() => {
      l.timer = undefined;
      l.queue.paused = false;
      this.pump();
    }, ms);
    l.timer.unref?.();
  }

  /** Starts the first waiting jobs in the fair order while there are free slots. */
  private pump(): void {
    if (!this.started || this.stopped) return;
    while (!this.slots.full) {
      // The best head so far and its slots, as locals (not an object per heap looked at).
      let best: Heap | undefined;
      let bestModel: Slots | undefined;
      let bestLane: Slots | undefined;
      for (const heaps of this.heaps) {
        for (const heap of heaps.values()) {
          const head = heap.head;
          if (!head) continue;
          const model = this.slotsOf(head.job.modelId);
          const upstream = this.slotsOfLane(head.job.modelId);
          // A full model, or a provider lane that is full here or paused: its jobs are skipped until a slot frees.
          if (model?.full || upstream?.full) continue;
          if (!best || before(head, best.head!)) {
            best = heap;
            bestModel = model;
            bestLane = upstream;
          }
        }
      }
      if (!best) return;
      const w = best.pop()!;
      this.leave(w);
      this.run(w.job, bestModel, bestLane);
    }
  }

  async position(generationId: string): Promise<QueuePosition | undefined> {
    const me = this.waiting.get(generationId);
    if (!me) return undefined;
    let ahead = 0;
    for (const w of this.waiting.values()) if (w !== me && before(w, me)) ahead++;
    return { aheadOfYou: ahead, position: ahead + 1 };
  }

  /** Starts a job now: pump found a free slot of every limit that applies. */
  private run(job: Job, model: Slots | undefined, lane: Slots | undefined): void {
    const signal = new JobAbort();
    this.running.set(job.generationId, signal);
    this.slots.take();
    model?.take();
    lane?.take();
    const finished = (): void => {
      this.running.delete(job.generationId);
      lane?.give();
      model?.give();
      this.slots.give();
      this.pump();
    };
    // A handler that threw or rejected logged its own fault; its generation is recovered from the store later.
    let running: Promise<void>;
    try {
      running = this.handler!(job, signal);
    } catch (err) {
      running = Promise.reject(err);
    }
    running.then(finished, finished);
  }

  async start(handler: JobHandler, settings?: RunnerSettings): Promise<void> {
    // Explicit constructor options win; otherwise the service's settings apply.
    if (settings && this.options.concurrency === undefined) this.concurrency = settings.concurrency;
    if (settings && this.options.modelConcurrency === undefined) this.modelConcurrency = settings.modelConcurrency;
    this.laneOf = settings?.laneOf;
    this.handler = handler;
    this.slots.concurrency = this.concurrency;
    this.stopped = false;
    this.started = true;
    this.pump();
  }

  async stop(options: QueueStopOptions = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.started = false;
    // Waiting jobs are dropped: they are `pending` (or parked) in the store, and recovery enqueues them on the next start.
    for (const t of this.delayed.values()) this.clock.clearTimeout(t);
    this.delayed.clear();
    for (const heaps of this.heaps) heaps.clear();
    for (const l of this.laneSlots.values()) {
      this.clock.clearTimeout(l.timer);
      l.timer = undefined;
      l.pausedUntil = 0;
      l.queue.paused = false;
    }
    this.waiting.clear();
    this.counts.clear();
    const timeoutMs = options.timeoutMs ?? 10_000;
    if (await this.idleWithin(timeoutMs)) return;
    for (const c of this.running.values()) c.abort(new Error('queue stopped'));
    // Handlers honour the signal; give them a moment to write their outcome.
    await this.idleWithin(1000);
  }

  /** Whether every running job finished within `ms`. */
  private async idleWithin(ms: number): Promise<boolean> {
    let timer: ClockTimer | undefined;
    const idle = await Promise.race([
      this.slots.onIdle().then(() => true),
      new Promise<boolean>((resolve) => {
        timer = this.clock.setTimeout(() => resolve(false), ms);
      }),
    ]);
    this.clock.clearTimeout(timer);
    return idle;
  }

  abort(generationId: string): boolean {
    const c = this.running.get(generationId);
    if (c) {
      c.abort(new Error('cancelled'));
      return true;
    }
    return false;
  }

  /** Jobs waiting plus running; for tests and metrics. */
  get size(): number {
    return this.waiting.size + this.running.size;
  }

  /** Jobs running now (a job held back by a full or paused lane is waiting, not running); for tests and metrics. */
  get active(): number {
    return this.running.size;
  }
}
