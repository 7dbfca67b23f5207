import { describe, expect, it } from 'vitest';
import { InProcessQueue } from '@genservice/core';
import type { Job, JobSignal, RunnerSettings } from '@genservice/core/ports';

/** A handler whose runs wait until released, recording what ran and with which signal. */
function gated() {
  const started: string[] = [];
  const release = new Map<string, () => void>();
  const signals = new Map<string, JobSignal>();
  const handler = (job: Job, signal: JobSignal): Promise<void> => {
    started.push(job.generationId);
    signals.set(job.generationId, signal);
    return new Promise<void>((resolve) => {
      release.set(job.generationId, resolve);
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  };
  return { started, release, signals, handler };
}

const settings = (over: Partial<RunnerSettings> = {}): RunnerSettings => ({
  concurrency: 4,
  leaseMs: 30_000,
  modelConcurrency: () => undefined,
  logger: { debug() {}, info() {}, warn() {}, error() {} } as unknown as RunnerSettings['logger'],
  ...over,
});

const tick = () => new Promise((r) => setImmediate(r));

describe('InProcessQueue', () => {
  it("with 10,000 queued for an organisation of weight 5, another organisation's next job waits at most one job per slot", async () => {
    const q = new InProcessQueue();
    const g = gated();
    const c = 4;
    await q.start(g.handler, settings({ concurrency: c }));
    for (let i = 0; i < 10_000; i++) await q.enqueue({ generationId: `big-${i}`, modelId: 'm', ownerId: 'big-user', organizationId: 'big', weight: 5 });
    // More wait than could start: those that fit start at once (not on the queue's next turn).
    expect(g.started).toHaveLength(c);
    await q.enqueue({ generationId: 'small', modelId: 'm', ownerId: 'small-user', organizationId: 'small', weight: 1 });
    expect((await q.position('small'))?.aheadOfYou).toBeLessThanOrEqual(c);
    // Each freed slot takes the next job in the fair order: the small organisation's comes within one round.
    for (let i = 0; i < c + 1 && !g.started.includes('small'); i++) {
      g.release.get(g.started[i]!)!();
      await tick();
    }
    expect(g.started).toContain('small');
    expect(g.started.indexOf('small') - c).toBeLessThanOrEqual(c);
    await q.stop({ timeoutMs: 10 });
  });

  it('starts new jobs on its next turn while they all fit the free slots, and those that fit at once when more wait', async () => {
    const q = new InProcessQueue();
    const g = gated();
    await q.start(g.handler, settings({ concurrency: 3 }));
    await q.enqueue({ generationId: 'a', modelId: 'm', ownerId: 'u' });
    await q.enqueue({ generationId: 'b', modelId: 'm', ownerId: 'u' });
    // Two waiting, three free: both start on the next turn (after the work of this one).
    expect(g.started).toEqual([]);
    await tick();
    expect(g.started).toEqual(['a', 'b']);
    // One slot free: the first job that would not fit with the next one starts now.
    await q.enqueue({ generationId: 'c', modelId: 'm', ownerId: 'u' });
    expect(g.started).toEqual(['a', 'b', 'c']);
    await q.enqueue({ generationId: 'd', modelId: 'm', ownerId: 'u' });
    expect(g.started).toEqual(['a', 'b', 'c']);
    g.release.get('a')!();
    await tick();
    expect(g.started).toEqual(['a', 'b', 'c', 'd']);
    await q.stop({ timeoutMs: 10 });
  });

  it('a job of an organisation keeps its fields on its way to the handler (organisation, weight, priority)', async () => {
    const q = new InProcessQueue();
    const seen: Job[] = [];
    await q.start(async (job) => void seen.push(job), settings());
    const job: Job = { generationId: 'g', modelId: 'm', ownerId: 'u', organizationId: 'o', weight: 2, priority: 'high' };
    await q.enqueue(job);
    await tick();
    expect(seen).toEqual([job]);
    await q.stop({ timeoutMs: 10 });
  });

  it('holds jobs until start (paused), then runs at most `concurrency` at once and the next as one ends', async () => {
    const q = new InProcessQueue();
    const g = gated();
    for (let i = 0; i < 6; i++) await q.enqueue({ generationId: `g${i}`, modelId: 'm', ownerId: `u${i}` });
    expect(g.started).toEqual([]);
    await q.start(g.handler, settings({ concurrency: 2 }));
    expect(g.started).toEqual(['g0', 'g1']);
    g.release.get('g0')!();
    await tick();
    expect(g.started).toEqual(['g0', 'g1', 'g2']);
    await q.stop({ timeoutMs: 0 });
  });

  it("a model's own concurrency limits its jobs; another model's job takes the free slot", async () => {
    const q = new InProcessQueue();
    const g = gated();
    await q.enqueue({ generationId: 'a1', modelId: 'slow', ownerId: 'u1' });
    await q.enqueue({ generationId: 'a2', modelId: 'slow', ownerId: 'u2' });
    await q.enqueue({ generationId: 'b1', modelId: 'fast', ownerId: 'u3' });
    await q.start(g.handler, settings({ concurrency: 4, modelConcurrency: (m) => (m === 'slow' ? 1 : undefined) }));
    expect(g.started).toEqual(['a1', 'b1']);
    g.release.get('a1')!();
    await tick();
    expect(g.started).toEqual(['a1', 'b1', 'a2']);
    await q.stop({ timeoutMs: 0 });
  });

  it('stop waits for running jobs to finish (onIdle), and aborts them once its timeout passes', async () => {
    const q = new InProcessQueue();
    const g = gated();
    await q.enqueue({ generationId: 'g1', modelId: 'm' });
    await q.start(g.handler, settings());
    let stopped = false;
    const stopping = q.stop({ timeoutMs: 60_000 }).then(() => (stopped = true));
    await tick();
    expect(stopped).toBe(false);
    g.release.get('g1')!();
    await stopping;
    expect(g.signals.get('g1')!.aborted).toBe(false);

    const q2 = new InProcessQueue();
    const g2 = gated();
    await q2.enqueue({ generationId: 'h1', modelId: 'm' });
    await q2.start(g2.handler, settings());
    await q2.stop({ timeoutMs: 0 });
    expect(g2.signals.get('h1')!.aborted).toBe(true);
  });

  it('abort(id) fires the running job’s signal', async () => {
    const q = new InProcessQueue();
    const g = gated();
    await q.enqueue({ generationId: 'g1', modelId: 'm' });
    await q.start(g.handler, settings());
    expect(q.abort('g1')).toBe(true);
    expect(g.signals.get('g1')!.aborted).toBe(true);
    expect(q.abort('nope')).toBe(false);
    await q.stop({ timeoutMs: 0 });
  });
});
