import { describe, expect, it } from 'vitest';
import { silentLogger } from '@genservice/core';
import type { Job, JobHandler, JobQueue, RunnerSettings } from '@genservice/core/ports';
import { sleep, uid, useFresh, waitFor } from './harness.js';

export interface QueueUnderTest {
  queue: JobQueue;
  /**
   * When the queue was built to run at most this many jobs at once, say so and the suite checks it. Leave it out for
   * a queue without a limit.
   */
  concurrency?: number;
  /**
   * The runner settings the suite hands to `start` (the rest default: concurrency 8, leaseMs 1000). Keep leaseMs
   * within what the queue's own timing allows.
   */
  settings?: Partial<RunnerSettings>;
  /**
   * The queue was built without a concurrency of its own: the suite then checks that it runs at most the
   * `concurrency` the service hands to `start`.
   */
  takesConcurrencyFromStart?: boolean;
  close(): Promise<void>;
}

/**
 * Contract every JobQueue passes. `make()` must give a queue that is not started and holds no jobs; `close()`
 * releases whatever it made (it may stop the queue again, which must be harmless).
 */
export function runQueueContract(name: string, make: () => Promise<QueueUnderTest>): void {
  describe(`${name}: JobQueue contract`, () => {
    const subject = useFresh(make);
    const queue = (): JobQueue => subject().queue;
    const job = (): Job => ({ generationId: uid('gen'), modelId: 'model-a' });
    const settings = (over: Partial<RunnerSettings> = {}): RunnerSettings => ({
      concurrency: 8,
      leaseMs: 1000,
      modelConcurrency: () => undefined,
      logger: silentLogger,
      ...subject().settings,
      ...over,
    });
    /** Starts the queue as a service would: with its runner settings. */
    const start = (handler: JobHandler, over: Partial<RunnerSettings> = {}): Promise<void> => queue().start(handler, settings(over));

    /** Records every handler call; `hold` keeps jobs running until released. */
    function recorder(hold = false): {
      seen: string[];
      running: Set<string>;
      maxRunning: number;
      signals: Map<string, AbortSignal>;
      release(): void;
      handler: (job: Job, signal: AbortSignal) => Promise<void>;
    } {
      let open: () => void = () => undefined;
      const gate = hold ? new Promise<void>((resolve) => (open = resolve)) : Promise.resolve();
      const state = {
        seen: [] as string[],
        running: new Set<string>(),
        maxRunning: 0,
        signals: new Map<string, AbortSignal>(),
        release: (): void => open(),
        handler: async (j: Job, signal: AbortSignal): Promise<void> => {
          state.seen.push(j.generationId);
          state.signals.set(j.generationId, signal);
          state.running.add(j.generationId);
          state.maxRunning = Math.max(state.maxRunning, state.running.size);
          try {
            await gate;
            await sleep(1);
          } finally {
            state.running.delete(j.generationId);
          }
        },
      };
      return state;
    }

    it('hands every enqueued job to the handler, with its model and a live signal', async () => {
      const r = recorder();
      await start(r.handler);
      const jobs = Array.from({ length: 40 }, job);
      await Promise.all(jobs.map((j) => queue().enqueue(j)));
      await waitFor(() => jobs.every((j) => r.seen.includes(j.generationId)), 'every job to reach the handler');
      for (const j of jobs) expect(r.signals.get(j.generationId)?.aborted).toBe(false);
      await queue().stop({ timeoutMs: 1000 });
    });

    it('passes the job as enqueued', async () => {
      const got: Job[] = [];
      await queue().start(async (j) => {
        got.push(j);
      }, settings());
      const j = { generationId: uid('gen'), modelId: 'model-with-ünïcode' };
      await queue().enqueue(j);
      await waitFor(() => got.length === 1, 'the job');
      expect(got[0]).toMatchObject(j);
      await queue().stop({ timeoutMs: 1000 });
    });

    it('runs jobs enqueued before start once it starts', async () => {
      const jobs = Array.from({ length: 5 }, job);
      for (const j of jobs) await queue().enqueue(j);
      const r = recorder();
      await start(r.handler);
      await waitFor(() => jobs.every((j) => r.seen.includes(j.generationId)), 'jobs enqueued before start');
      await queue().stop({ timeoutMs: 1000 });
    });

    it('runs a generation enqueued twice while waiting only once', async () => {
      const twice = job();
      const other = job();
      await queue().enqueue(twice);
      await queue().enqueue(twice);
      await Promise.all([queue().enqueue(twice), queue().enqueue(twice), queue().enqueue(other)]);
      const r = recorder();
      await start(r.handler);
      await waitFor(() => r.seen.includes(twice.generationId) && r.seen.includes(other.generationId), 'both jobs');
      await sleep(100);
      expect(r.seen.filter((id) => id === twice.generationId)).toHaveLength(1);
      await queue().stop({ timeoutMs: 1000 });
    });

    it('keeps handing out jobs after a handler rejects', async () => {
      const seen: string[] = [];
      const bad = job();
      await queue().start(async (j) => {
        seen.push(j.generationId);
        if (j.generationId === bad.generationId) throw new Error('infrastructure fault');
      }, settings());
      await queue().enqueue(bad);
      await waitFor(() => seen.includes(bad.generationId), 'the failing job');
      const after = Array.from({ length: 3 }, job);
      for (const j of after) await queue().enqueue(j);
      await waitFor(() => after.every((j) => seen.includes(j.generationId)), 'jobs after the failure');
      await queue().stop({ timeoutMs: 1000 });
    });

    it('stop waits for a running job that finishes within the timeout, without aborting it', async () => {
      let finished = false;
      let signal: AbortSignal | undefined;
      const j = job();
      await queue().start(async (_job, s) => {
        signal = s;
        await sleep(200);
        finished = true;
      }, settings());
      await queue().enqueue(j);
      await waitFor(() => signal !== undefined, 'the job to start');
      await queue().stop({ timeoutMs: 5_000 });
      expect(finished).toBe(true);
      expect(signal?.aborted).toBe(false);
    });

    it('stop aborts a running job once the timeout passes, and then returns', async () => {
      let signal: AbortSignal | undefined;
      let sawAbort = false;
      await queue().start(
        (_job, s) =>
          new Promise<void>((resolve) => {
            signal = s;
            const give = setTimeout(resolve, 20_000);
            s.addEventListener('abort', () => {
              sawAbort = true;
              clearTimeout(give);
              resolve();
            });
          }), settings());
      await queue().enqueue(job());
      await waitFor(() => signal !== undefined, 'the job to start');
      const started = Date.now();
      await queue().stop({ timeoutMs: 150 });
      const took = Date.now() - started;
      expect(signal?.aborted).toBe(true);
      expect(sawAbort).toBe(true);
      expect(took).toBeGreaterThanOrEqual(100);
      expect(took).toBeLessThan(10_000);
    });

    it('starts no job after stop', async () => {
      const r = recorder(true);
      await start(r.handler);
      const first = job();
      await queue().enqueue(first);
      await waitFor(() => r.seen.includes(first.generationId), 'the first job');
      // Jobs that are waiting when stop is called must not start later either.
      const waiting = Array.from({ length: 50 }, job);
      for (const j of waiting) await queue().enqueue(j).catch(() => undefined);
      const seenAtStop = r.seen.length;
      const stopping = queue().stop({ timeoutMs: 2_000 });
      r.release();
      await stopping;
      const seenAfterStop = r.seen.length;
      // A queue may have started waiting jobs before stop was called, but none once stop has returned.
      expect(seenAfterStop).toBeGreaterThanOrEqual(seenAtStop);
      await queue().enqueue(job()).catch(() => undefined);
      await sleep(200);
      expect(r.seen.length).toBe(seenAfterStop);
    });

    it("takes the service's concurrency from start when built without one", async () => {
      if (!subject().takesConcurrencyFromStart) return;
      const r = recorder(true);
      await start(r.handler, { concurrency: 2 });
      for (let i = 0; i < 6; i++) await queue().enqueue(job());
      await waitFor(() => r.running.size === 2, 'two running');
      await sleep(100);
      expect(r.maxRunning).toBe(2);
      r.release();
      await waitFor(() => r.seen.length === 6, 'all six handed out');
      expect(r.maxRunning).toBe(2);
    });

    it("takes waiting work round-robin across owners: a flood does not starve another owner's job", async () => {
      const c = subject().concurrency ?? subject().settings?.concurrency ?? 8;
      const r = recorder(true);
      await start(r.handler);
      const flood = Array.from({ length: Math.max(40, 6 * c) }, () => ({ ...job(), ownerId: 'flooding-user' }));
      for (const j of flood) await queue().enqueue(j);
      await waitFor(() => r.running.size === c, `${c} running`);
      const other = { ...job(), ownerId: 'another-user' };
      await queue().enqueue(other);
      await sleep(50);
      r.release();
      await waitFor(() => r.seen.length === flood.length + 1, 'every job handed out', 20_000);
      // The first c were running before it arrived; it must start within the next 2 x c.
      const at = r.seen.indexOf(other.generationId);
      expect(at, `started ${at}th of ${r.seen.length}`).toBeGreaterThanOrEqual(c);
      expect(at).toBeLessThan(c + 2 * c);
    });

    it('hands out a delayed job no sooner than its delay, also while the same generation runs', async () => {
      const seenAt: Array<{ id: string; at: number }> = [];
      let enqueuedFromInside = false;
      const j = job();
      const t0 = Date.now();
      await start(async (got) => {
        seenAt.push({ id: got.generationId, at: Date.now() });
        if (!enqueuedFromInside) {
          enqueuedFromInside = true;
          // The next check of a remote job, enqueued from inside its current run.
          await queue().enqueue(got, { delayMs: 600 });
        }
      });
      await queue().enqueue(j);
      await waitFor(() => seenAt.length === 2, 'the delayed job', 10_000);
      expect(seenAt.map((s) => s.id)).toEqual([j.generationId, j.generationId]);
      expect(seenAt[1]!.at - seenAt[0]!.at).toBeGreaterThanOrEqual(550);
      expect(seenAt[0]!.at - t0).toBeLessThan(5000);
      await queue().stop({ timeoutMs: 1000 });
    });

    it('respects its concurrency limit, when it has one', async () => {
      const limit = subject().concurrency;
      const r = recorder(true);
      await start(r.handler);
      const jobs = Array.from({ length: (limit ?? 4) * 3 }, job);
      for (const j of jobs) await queue().enqueue(j);
      if (limit !== undefined) {
        await waitFor(() => r.running.size === limit, `${limit} jobs to run at once`);
        await sleep(100);
        expect(r.running.size).toBe(limit);
      }
      r.release();
      await waitFor(() => jobs.every((j) => r.seen.includes(j.generationId)), 'every job');
      if (limit !== undefined) expect(r.maxRunning).toBeLessThanOrEqual(limit);
      await queue().stop({ timeoutMs: 1000 });
    });

    it('abort (when offered) fires the signal of a running job and answers false for others', async () => {
      const q = queue();
      if (!q.abort) return;
      let signal: AbortSignal | undefined;
      await q.start(
        (_job, s) =>
          new Promise<void>((resolve) => {
            signal = s;
            s.addEventListener('abort', () => resolve());
          }), settings());
      const j = job();
      await q.enqueue(j);
      await waitFor(() => signal !== undefined, 'the job to start');
      expect(q.abort(uid('not-running'))).toBe(false);
      expect(q.abort(j.generationId)).toBe(true);
      expect(signal?.aborted).toBe(true);
      await q.stop({ timeoutMs: 1000 });
    });
  });
}
