import { describe, expect, it } from 'vitest';
import { silentLogger } from '@genservice/core';
import type { Job, JobHandler, JobQueue, JobSignal, RunnerSettings } from '@genservice/core/ports';
import { createDeferred } from '../fakes.js';
import { until } from '../until.js';
import { uid, useFresh } from './harness.js';
import { recorder, type Recorder } from './queue-recorder.js';
import { queueFairnessCases } from './queue-fairness.js';

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

    /**
     * With `limit` held runs going, lets them go one at a time until `total` were handed out: each freed slot must take
     * exactly one waiting job, so `limit` run at every step and never more.
     */
    async function releaseOneByOne(r: Recorder, limit: number, total: number): Promise<void> {
      for (let started = r.seen.length; started < total; started++) {
        expect(r.running.size, `running once ${started} were handed out`).toBe(limit);
        r.releaseOne();
        await until(() => r.seen.length > started, `job ${started + 1} to start in the freed slot`);
      }
      expect(r.maxRunning).toBeLessThanOrEqual(limit);
    }

    it('hands every enqueued job to the handler, with its model and a live signal', async () => {
      const r = recorder();
      await start(r.handler);
      const jobs = Array.from({ length: 40 }, job);
      await Promise.all(jobs.map((j) => queue().enqueue(j)));
      await until(() => jobs.every((j) => r.seen.includes(j.generationId)), 'every job to reach the handler');
      for (const j of jobs) expect(r.signals.get(j.generationId)?.aborted).toBe(false);
      await queue().stop({ timeoutMs: 1000 });
    });

    it('passes the job as enqueued', async () => {
      const got: Job[] = [];
      await queue().start(async (j) => {
        got.push(j);
      }, settings());
      const j: Job = { generationId: uid('gen'), modelId: 'model-with-ünïcode', ownerId: 'user-1', organizationId: 'org-1', weight: 2, priority: 'high' };
      await queue().enqueue(j);
      await until(() => got.length === 1, 'the job');
      expect(got[0]).toMatchObject(j);
      await queue().stop({ timeoutMs: 1000 });
    });

    it('runs jobs enqueued before start once it starts', async () => {
      const jobs = Array.from({ length: 5 }, job);
      for (const j of jobs) await queue().enqueue(j);
      const r = recorder();
      await start(r.handler);
      await until(() => jobs.every((j) => r.seen.includes(j.generationId)), 'jobs enqueued before start');
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
      await until(() => r.seen.includes(twice.generationId) && r.seen.includes(other.generationId), 'both jobs');
      // A job enqueued after every copy: one owner's waiting jobs are handed out in the order they came, so once it
      // has run and nothing runs any more, a second copy would have run before it.
      const last = job();
      await queue().enqueue(last);
      await until(() => r.seen.includes(last.generationId) && r.running.size === 0, 'a job enqueued after every copy to run');
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
      await until(() => seen.includes(bad.generationId), 'the failing job');
      const after = Array.from({ length: 3 }, job);
      for (const j of after) await queue().enqueue(j);
      await until(() => after.every((j) => seen.includes(j.generationId)), 'jobs after the failure');
      await queue().stop({ timeoutMs: 1000 });
    });

    it('stop waits for a running job that finishes within the timeout, without aborting it', async () => {
      const events: string[] = [];
      const letGo = createDeferred();
      let signal: JobSignal | undefined;
      const j = job();
      await queue().start(async (_job, s) => {
        signal = s;
        await letGo.promise;
        events.push('job finished');
      }, settings());
      await queue().enqueue(j);
      await until(() => signal !== undefined, 'the job to start');
      const stopping = queue().stop({ timeoutMs: 5_000 }).then(() => events.push('stop returned'));
      // A turn of the event loop first, in which a stop that does not wait would return; then the job may finish.
      await new Promise((resolve) => setImmediate(resolve));
      events.push('job let go');
      letGo.resolve();
      await stopping;
      expect(events).toEqual(['job let go', 'job finished', 'stop returned']);
      expect(signal?.aborted).toBe(false);
    });

    it('stop aborts a running job once the timeout passes, and then returns', async () => {
      const events: string[] = [];
      let signal: JobSignal | undefined;
      // A job that never finishes on its own: only its signal ends it.
      await queue().start(
        (_job, s) =>
          new Promise<void>((resolve) => {
            signal = s;
            s.addEventListener('abort', () => {
              events.push('job aborted');
              resolve();
            });
          }),
        settings(),
      );
      await queue().enqueue(job());
      await until(() => signal !== undefined, 'the job to start');
      const timeoutMs = 150;
      events.push('stop called');
      // Set before stop sets its own timeout, so it fires first: the abort must come after it (stop waits first).
      const halfway = setTimeout(() => events.push('half the timeout passed'), timeoutMs / 2);
      await queue().stop({ timeoutMs });
      clearTimeout(halfway);
      events.push('stop returned');
      expect(signal?.aborted).toBe(true);
      expect(events).toEqual(['stop called', 'half the timeout passed', 'job aborted', 'stop returned']);
    });

    it('starts no job after stop', async () => {
      const r = recorder(true);
      await start(r.handler);
      const first = job();
      await queue().enqueue(first);
      await until(() => r.seen.includes(first.generationId), 'the first job');
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
      // Nothing to await: the assertion is that no job starts, so this only bounds how long a broken queue gets to start one.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(r.seen.length).toBe(seenAfterStop);
    });

    it("takes the service's concurrency from start when built without one", async () => {
      if (!subject().takesConcurrencyFromStart) return;
      const r = recorder(true);
      await start(r.handler, { concurrency: 2 });
      for (let i = 0; i < 6; i++) await queue().enqueue(job());
      await until(() => r.running.size >= 2, 'two running');
      expect(r.maxRunning).toBe(2);
      await releaseOneByOne(r, 2, 6);
      r.release();
      await until(() => r.seen.length === 6, 'all six handed out');
      expect(r.maxRunning).toBe(2);
    });

    it("takes waiting work round-robin across owners: a flood does not starve another owner's job", async () => {
      const c = subject().concurrency ?? subject().settings?.concurrency ?? 8;
      const r = recorder(true);
      await start(r.handler);
      const flood = Array.from({ length: Math.max(40, 6 * c) }, () => ({ ...job(), ownerId: 'flooding-user' }));
      for (const j of flood) await queue().enqueue(j);
      await until(() => r.running.size === c, `${c} running`);
      const other = { ...job(), ownerId: 'another-user' };
      await queue().enqueue(other);
      r.release();
      await until(() => r.seen.length === flood.length + 1, { what: 'every job handed out', timeoutMs: 20_000 });
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
      await until(() => seenAt.length === 2, { what: 'the delayed job', timeoutMs: 10_000 });
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
        await until(() => r.running.size >= limit, `${limit} jobs to run at once`);
        expect(r.running.size).toBe(limit);
        await releaseOneByOne(r, limit, jobs.length);
      }
      r.release();
      await until(() => jobs.every((j) => r.seen.includes(j.generationId)), 'every job');
      if (limit !== undefined) expect(r.maxRunning).toBeLessThanOrEqual(limit);
      await queue().stop({ timeoutMs: 1000 });
    });

    queueFairnessCases({ queue, concurrency: () => subject().concurrency ?? subject().settings?.concurrency ?? 8, start });

    it('abort (when offered) fires the signal of a running job and answers false for others', async () => {
      const q = queue();
      if (!q.abort) return;
      let signal: JobSignal | undefined;
      await q.start(
        (_job, s) =>
          new Promise<void>((resolve) => {
            signal = s;
            s.addEventListener('abort', () => resolve());
          }), settings());
      const j = job();
      await q.enqueue(j);
      await until(() => signal !== undefined, 'the job to start');
      expect(q.abort(uid('not-running'))).toBe(false);
      expect(q.abort(j.generationId)).toBe(true);
      expect(signal?.aborted).toBe(true);
      await q.stop({ timeoutMs: 1000 });
    });
  });
}
