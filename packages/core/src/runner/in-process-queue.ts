import PQueue from 'p-queue';
import type { EnqueueOptions, Job, JobHandler, JobQueue, QueueStopOptions, RunnerSettings } from '../ports/queue.js';

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
}

/**
 * The embedded runner: p-queue in this process. Waiting jobs live in memory only; the store still holds them as
 * `pending`, and recovery enqueues them again on the next start, so a stop or crash loses none.
 */
export class InProcessQueue implements JobQueue {
  private readonly global: PQueue;
  private readonly perModel = new Map<string, PQueue>();
  private readonly waiting = new Set<string>();
  private readonly running = new Map<string, AbortController>();
  private handler: JobHandler | undefined;
  private backlog: Job[] = [];
  private stopped = false;
  private modelConcurrency: ((modelId: string) => number | undefined) | undefined;

  constructor(private readonly options: InProcessQueueOptions = {}) {
    this.global = new PQueue({ concurrency: options.concurrency ?? 8 });
    this.modelConcurrency = options.modelConcurrency;
  }

  async enqueue(job: Job, _options?: EnqueueOptions): Promise<void> {
    if (this.waiting.has(job.generationId) || this.running.has(job.generationId)) return;
    if (!this.handler || this.stopped) {
      if (this.backlog.length >= (this.options.backlogLimit ?? 10_000)) return;
      this.waiting.add(job.generationId);
      this.backlog.push(job);
      return;
    }
    this.waiting.add(job.generationId);
    this.schedule(job);
  }

  private lane(modelId: string): PQueue | undefined {
    const limit = this.modelConcurrency?.(modelId);
    if (!limit) return undefined;
    let q = this.perModel.get(modelId);
    if (!q) {
      q = new PQueue({ concurrency: limit });
      this.perModel.set(modelId, q);
    }
    return q;
  }

  private schedule(job: Job): void {
    const run = (): Promise<void> =>
      this.global.add(async () => {
        if (this.stopped || !this.waiting.delete(job.generationId)) return;
        const controller = new AbortController();
        this.running.set(job.generationId, controller);
        try {
          await this.handler!(job, controller.signal);
        } catch {
          // The handler logs its own faults; a job that threw is recovered from the store later.
        } finally {
          this.running.delete(job.generationId);
        }
      });
    const lane = this.lane(job.modelId);
    // A model lane admits only its share of jobs to the global queue, so one slow model cannot take every slot.
    void (lane ? lane.add(run) : run());
  }

  async start(handler: JobHandler, settings?: RunnerSettings): Promise<void> {
    // Explicit constructor options win; otherwise the service's settings apply.
    if (settings && this.options.concurrency === undefined) this.global.concurrency = settings.concurrency;
    if (settings && this.options.modelConcurrency === undefined) this.modelConcurrency = settings.modelConcurrency;
    this.handler = handler;
    this.stopped = false;
    const backlog = this.backlog;
    this.backlog = [];
    for (const job of backlog) this.schedule(job);
  }

  async stop(options: QueueStopOptions = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.global.clear();
    for (const q of this.perModel.values()) q.clear();
    this.waiting.clear();
    const timeoutMs = options.timeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    const idle = Promise.all([this.global.onIdle(), ...[...this.perModel.values()].map((q) => q.onIdle())]);
    const timedOut = await Promise.race([
      idle.then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      for (const c of this.running.values()) c.abort(new Error('queue stopped'));
      // Handlers honour the signal; give them a moment to write their outcome.
      await Promise.race([idle, new Promise((r) => setTimeout(r, 1000))]);
    }
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
}
