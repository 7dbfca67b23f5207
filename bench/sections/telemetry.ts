/**
 * What observability costs a request: `service.handle()` GET (a completed generation) and POST (a create, run to
 * completion by the in-process runner) with metrics and tracing on (a Prometheus MeterProvider recording every
 * instrument, the tracer the OpenTelemetry API gives without an SDK: no-op) against off (no SDK: every instrument a
 * no-op), CPU time per request. In process there is no framework or socket to hide the cost in, so this is the
 * strictest comparison.
 *
 * Each side is a process of its own (sections/telemetry-side.ts), the two alive at once, and the work is cut in short
 * chunks handed to the two in turn (off, on, on, off, ...): both sides run at the same moments of the machine. Several
 * such pairs run one after the other.
 * The 2-core VM changes speed by 2-3x for seconds to minutes at a time, so sides run one after the other (a fresh
 * process per round, as before 2026-11-26) read up to 15 % apart for the same code, more than the 5 % the row bounds.
 * One shared process is no answer either: there the no-op instruments and the SDK's meet at the same call sites, and
 * GET, which records nothing through the SDK, read 1-14 % apart.
 *
 * A side's figure is its CPU time over all its chunks (of every pair) per request; the row's ratio is on over off.
 * `TELEMETRY_PROF=<dir>` writes each side's CPU profile to `<dir>/on` and `<dir>/off`.
 */
import type { ChildProcess } from 'node:child_process';
import { nextMessage, spawnTs, stopChild } from '../lib/proc.js';

export interface TelemetryPlan {
  /** Pairs of processes (an off and an on side), one after the other. */
  pairs: number;
  /** Chunks of each kind per side of a pair. */
  chunks: number;
  /** GETs per chunk. */
  gets: number;
  /** POSTs (run to completion) per chunk. */
  posts: number;
  /** Requests of each kind each side runs before the first chunk. */
  warmGets: number;
  warmPosts: number;
}

type Kind = 'get' | 'post';
type Mode = 'off' | 'on';

export interface TelemetryResult {
  /** CPU µs per request of each side over all its chunks, and each pair of chunks' on / off ratio. */
  get: { off: number; on: number; ratios: number[] };
  post: { off: number; on: number; ratios: number[] };
}

async function start(mode: Mode, plan: TelemetryPlan): Promise<ChildProcess> {
  const child = spawnTs('sections/telemetry-side.ts', { core: 0, args: [mode, String(plan.warmGets), String(plan.warmPosts)], nodeArgs: ['--expose-gc', ...(process.env.TELEMETRY_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.TELEMETRY_PROF}/${mode}`] : [])] });
  await nextMessage(child, (m) => m?.type === 'ready', 300_000);
  return child;
}

async function chunk(child: ChildProcess, kind: Kind, n: number): Promise<number> {
  const done = nextMessage<{ us: number }>(child, (m) => m?.type === 'done', 300_000);
  child.send({ type: 'chunk', kind, n });
  return (await done).us;
}

export async function telemetryBench(plan: TelemetryPlan): Promise<TelemetryResult> {
  const totals = { get: { off: 0, on: 0, ratios: [] as number[] }, post: { off: 0, on: 0, ratios: [] as number[] } };
  // Several pairs of processes, each pair given its share of the chunks: a process's own luck (where its code and heap
  // landed, what the JIT made of it) moved a side by up to 5 % even on GET, which records nothing through the SDK.
  for (let pair = 0; pair < plan.pairs; pair++) {
    const sides = {} as Record<Mode, ChildProcess>;
    try {
      const first: Mode[] = pair % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
      for (const mode of first) sides[mode] = await start(mode, plan);
      for (const kind of ['get', 'post'] as const) {
        const n = kind === 'get' ? plan.gets : plan.posts;
        for (let i = 0; i < plan.chunks; i++) {
          const order: Mode[] = i % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
          const us: Record<Mode, number> = { off: 0, on: 0 };
          for (const mode of order) us[mode] = await chunk(sides[mode], kind, n);
          totals[kind].off += us.off;
          totals[kind].on += us.on;
          totals[kind].ratios.push(us.on / us.off);
        }
      }
    } finally {
      await Promise.all(Object.values(sides).map((child) => stopChild(child)));
    }
  }
  const per = (kind: Kind, n: number) => ({ off: totals[kind].off / (n * plan.chunks * plan.pairs), on: totals[kind].on / (n * plan.chunks * plan.pairs), ratios: totals[kind].ratios });
  return { get: per('get', plan.gets), post: per('post', plan.posts) };
}
