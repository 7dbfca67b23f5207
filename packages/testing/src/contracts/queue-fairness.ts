import { expect, it } from 'vitest';
import type { Job, JobHandler, JobQueue, RunnerSettings } from '@genservice/core/ports';
import { until } from '../until.js';
import { uid } from './harness.js';
import { recorder } from './queue-recorder.js';

/** What the fairness cases need from the queue contract that runs them. */
export interface FairnessContext {
  queue(): JobQueue;
  /** The most jobs the queue runs at once in these cases. */
  concurrency(): number;
  start(handler: JobHandler, over?: Partial<RunnerSettings>): Promise<void>;
}

/** Counts, per tenant, how many of `ids` are theirs. */
function shares(ids: readonly string[], tenantOf: Map<string, string>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const id of ids) {
    const t = tenantOf.get(id);
    if (t !== undefined) out[t] = (out[t] ?? 0) + 1;
  }
  return out;
}

/**
 * The queue contract's cases for the fair order (weighted across organisations, round-robin across their users, by
 * priority within a share) and for `position`. Every case measures by the order the queue hands jobs out, never by time.
 */
export function queueFairnessCases(ctx: FairnessContext): void {
  const job = (over: Partial<Job> = {}): Job => ({ generationId: uid('gen'), modelId: 'model-a', ...over });

  it('shares the runner by organisation weight (5 / 2 / 1) while every organisation has work waiting', { timeout: 60_000 }, async () => {
    const plan = [
      { org: 'org-gold', weight: 5, jobs: 100 },
      { org: 'org-silver', weight: 2, jobs: 40 },
      { org: 'org-bronze', weight: 1, jobs: 20 },
    ];
    const tenantOf = new Map<string, string>();
    // Enqueued interleaved and before start, so the busy period begins with every organisation waiting.
    for (let i = 0; i < 100; i++) {
      for (const p of plan) {
        if (i >= p.jobs) continue;
        const j = job({ ownerId: `${p.org}-user`, organizationId: p.org, weight: p.weight });
        tenantOf.set(j.generationId, p.org);
        await ctx.queue().enqueue(j);
      }
    }
    const r = recorder();
    await ctx.start(r.handler);
    await until(() => r.seen.length === 160, { what: 'every job handed out', timeoutMs: 50_000 });
    // The busy period: the first half, in which every organisation still had work waiting.
    const got = shares(r.seen.slice(0, 80), tenantOf);
    const total = 8;
    for (const p of plan) {
      const expected = (80 * p.weight) / total;
      expect(Math.abs((got[p.org] ?? 0) - expected), `${p.org}: ${got[p.org]} of the first 80, expected ${expected} (${JSON.stringify(got)})`).toBeLessThanOrEqual(expected * 0.1);
    }
    await ctx.queue().stop({ timeoutMs: 1000 });
  });

  it("within an organisation, takes its users round-robin: one user's flood does not starve another user's job", { timeout: 60_000 }, async () => {
    const c = ctx.concurrency();
    const r = recorder(true);
    await ctx.start(r.handler);
    const flood: Job[] = [];
    for (let i = 0; i < Math.max(20, 3 * c); i++) {
      flood.push(job({ ownerId: 'a-flooder', organizationId: 'org-a' }));
      flood.push(job({ ownerId: 'b-flooder', organizationId: 'org-b' }));
    }
    for (const j of flood) await ctx.queue().enqueue(j);
    await until(() => r.running.size === c, `${c} running`);
    const colleague = job({ ownerId: 'a-colleague', organizationId: 'org-a' });
    await ctx.queue().enqueue(colleague);
    r.release();
    await until(() => r.seen.length === flood.length + 1, { what: 'every job handed out', timeoutMs: 50_000 });
    const at = r.seen.indexOf(colleague.generationId);
    expect(at, `started ${at}th of ${r.seen.length}`).toBeGreaterThanOrEqual(c);
    // Behind at most one round of each tenant per slot (and one of the colleague's own organisation).
    expect(at).toBeLessThanOrEqual(c + 2 * c);
  });

  it('within a tenant, high goes before normal; low runs only when nothing else waits', { timeout: 60_000 }, async () => {
    const c = ctx.concurrency();
    const r = recorder(true);
    await ctx.start(r.handler);
    for (let i = 0; i < c; i++) await ctx.queue().enqueue(job({ ownerId: 'filler' }));
    await until(() => r.running.size === c, `${c} running`);
    const lowFirst = job({ ownerId: 'tenant-t', priority: 'low' });
    await ctx.queue().enqueue(lowFirst);
    const normals: Job[] = [];
    for (let i = 0; i < 8; i++) {
      normals.push(job({ ownerId: 'tenant-t' }));
      normals.push(job({ ownerId: 'tenant-u', priority: 'normal' }));
    }
    for (const j of normals) await ctx.queue().enqueue(j);
    const high = job({ ownerId: 'tenant-t', priority: 'high' });
    await ctx.queue().enqueue(high);
    const lowLast = job({ ownerId: 'tenant-u', priority: 'low' });
    await ctx.queue().enqueue(lowLast);
    r.release();
    await until(() => r.seen.length === c + normals.length + 3, { what: 'every job handed out', timeoutMs: 50_000 });
    const handed = r.seen.slice(c);
    const tNormals = normals.filter((j) => j.ownerId === 'tenant-t').map((j) => handed.indexOf(j.generationId));
    // The high job went at its tenant's next turn: before the tenant's second normal job (its first was level with it).
    expect(handed.indexOf(high.generationId)).toBeLessThan(Math.min(...tNormals.slice(1)));
    // Both low jobs only after every other job, although one was enqueued before all of them.
    expect(handed.slice(-2).sort()).toEqual([lowFirst.generationId, lowLast.generationId].sort());
  });

  it('tells where a waiting job stands, and the number only goes down as work ahead of it starts', { timeout: 60_000 }, async () => {
    const q = ctx.queue();
    if (!q.position) return;
    const c = ctx.concurrency();
    const r = recorder(true);
    await ctx.start(r.handler);
    for (let i = 0; i < c; i++) await q.enqueue(job({ ownerId: 'filler' }));
    await until(() => r.running.size === c, `${c} running`);
    const line = Array.from({ length: 5 }, () => job({ ownerId: 'patient' }));
    for (const j of line) await q.enqueue(j);
    const last = line[4]!;
    expect(await q.position(line[0]!.generationId)).toEqual({ aheadOfYou: 0, position: 1 });
    expect(await q.position(last.generationId)).toEqual({ aheadOfYou: 4, position: 5 });
    expect(await q.position(r.seen[0]!)).toBeUndefined();
    expect(await q.position(uid('unknown'))).toBeUndefined();
    // Another tenant's first job goes level with this tenant's first: ahead of the last one.
    const other = job({ ownerId: 'someone-else' });
    await q.enqueue(other);
    const seenPositions: number[] = [(await q.position(last.generationId))!.aheadOfYou];
    expect(seenPositions[0]).toBe(5);
    while (!r.seen.includes(last.generationId)) {
      const started = r.seen.length;
      r.releaseOne();
      await until(() => r.seen.length > started, 'the next job to start');
      const p = await q.position(last.generationId);
      if (p === undefined) break;
      expect(p.aheadOfYou, `positions so far ${seenPositions.join(', ')}`).toBeLessThanOrEqual(seenPositions.at(-1)!);
      expect(p.position).toBe(p.aheadOfYou + 1);
      seenPositions.push(p.aheadOfYou);
    }
    expect(seenPositions.at(-1)).toBe(0);
    r.release();
    await q.stop({ timeoutMs: 1000 });
  });
}
