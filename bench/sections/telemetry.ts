/**
 * What observability costs a request: `service.handle()` GET (a completed generation) and POST (a create, run to
 * completion by the in-process runner) with metrics and tracing on (a Prometheus MeterProvider recording every
 * instrument, the tracer the OpenTelemetry API gives without an SDK: no-op) against off (no SDK: every instrument a
 * no-op), CPU time per request (min of the rounds). In process there is no framework or socket to hide the cost in, so
 * this is the strictest comparison.
 *
 * Each side runs in a fresh process per round (sections/telemetry-side.ts), the order alternating (off, on, on, off,
 * ...): in one shared process the two services' calls met at the same call sites (a no-op instrument's and the SDK's),
 * and whichever side ran second also carried the first one's heap; GET, which records nothing through the SDK, read
 * 1-14 % apart between the sides that way.
 */
import { nextMessage, spawnTs, stopChild } from '../lib/proc.js';

export interface TelemetryResult {
  /** CPU µs per request. */
  get: { off: number; on: number };
  post: { off: number; on: number };
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
  const out: TelemetryResult = { get: { off: Infinity, on: Infinity }, post: { off: Infinity, on: Infinity } };
  for (let round = 0; round < options.rounds; round++) {
    const order = round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
    for (const mode of order) {
      const r = await side(mode, options.gets, options.posts);
      out.get[mode] = Math.min(out.get[mode], r.get);
      out.post[mode] = Math.min(out.post[mode], r.post);
    }
  }
  return out;
}
