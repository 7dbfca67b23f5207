/**
 * What observability costs a request: `service.handle()` GET (a completed generation) and POST (a create, run to
 * completion by the in-process runner) with metrics and tracing on (a Prometheus MeterProvider recording every
 * instrument, the tracer the OpenTelemetry API gives without an SDK: no-op) against off (no SDK: every instrument a
 * no-op), CPU time per request. In process there is no framework or socket to hide the cost in, so
 * this is the strictest comparison.
 *
 * Each side runs in a fresh process per round (sections/telemetry-side.ts), the order alternating (off, on, on, off,
 * ...), and the row's ratio is the median of the rounds' ratios (`summarize`): in one shared process the two services' calls met at the same call sites (a no-op instrument's and the SDK's),
 * and whichever side ran second also carried the first one's heap; GET, which records nothing through the SDK, read
 * 1-14 % apart between the sides that way.
 */
import { nextMessage, spawnTs, stopChild } from '../lib/proc.js';

export interface TelemetryResult {
  /** CPU µs per request of each side, one entry per round (the two sides of a round run back to back). */
  get: { off: number[]; on: number[] };
  post: { off: number[]; on: number[] };
}

async function side(mode: 'on' | 'off', gets: number, posts: number): Promise<{ get: number; post: number }> {
  const child = spawnTs('sections/telemetry-side.ts', { core: 0, args: [mode, String(gets), String(posts)], nodeArgs: ['--expose-gc'] });
  try {
    return await nextMessage<{ get: number; post: number }>(child, (m) => m?.type === 'result', 300_000);
  } finally {
    await stopChild(child);
  }
}

export async function telemetryBench(options: { rounds: number; gets: number; posts: number }): Promise<TelemetryResult> {
  const out: TelemetryResult = { get: { off: [], on: [] }, post: { off: [], on: [] } };
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
    for (const mode of order) {
      const r = await side(mode, options.gets, options.posts);
      out.get[mode].push(r.get);
      out.post[mode].push(r.post);
    }
  }
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * The row's figures: each side's median, and the median of the rounds' on / off ratios. A round's two sides run back
 * to back, so its ratio is taken at one speed of the machine; the 2-core VM changes speed by 2-3x for minutes at a
 * time, which moves a best-of-rounds per side (the other sections' statistic) by more than the 5 % this row bounds.
 */
export function summarize(side: { off: number[]; on: number[] }): { on: number; off: number; ratio: number; ratios: number[] } {
  const ratios = side.on.map((on, i) => on / side.off[i]!);
  return { on: median(side.on), off: median(side.off), ratio: median(ratios), ratios };
}
