/**
 * What observability costs a request through HTTP: our Fastify server with metrics and tracing on (a Prometheus
 * MeterProvider recording every instrument; the tracer the OpenTelemetry API gives without an SDK: no-op) against the
 * same server off, for the GET and the POST (run until completed) of the HTTP section. Run as its own process pinned
 * to core 1 (the servers on core 0); sends `{ type: 'result', data }` over IPC.
 *
 * The figure is the server process's CPU time per request (/proc/<pid>/stat), not requests/s: both servers are up at
 * once and get the load in turn, in short runs (off, on, on, off, ...), in several pairs of processes, and each side
 * sums its runs. The 2-core VM changes speed by 2-3x for seconds to minutes at a time, more than the 5 % this bounds;
 * runs in turn see the same speeds, and CPU time does not count the time a server waits for the load generator.
 *
 * argv[2] is a JSON plan: `{ pairs, runs, seconds, warmup, pipelining, connections }`.
 */
import autocannon, { type Result as AutocannonResult } from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { CASES, startServer, type Target } from '../lib/http-cases.js';
import { childLifecycle, nextMessage, processCpuUs, send, stopChild } from '../lib/proc.js';

export interface TelemetryHttpPlan {
  pairs: number;
  /** Runs of each case per side of a pair. */
  runs: number;
  /** Seconds per run. */
  seconds: number;
  /** Seconds of each case per side before the first run. */
  warmup: number;
  pipelining: number;
  connections: number;
}

export interface TelemetryHttpResult {
  /** CPU µs per request of each side, summed over every run; each pair of runs' on / off ratio. */
  get: { off: number; on: number; ratios: number[] };
  post: { off: number; on: number; ratios: number[] };
}

type Mode = 'off' | 'on';


function fire(t: Target, name: 'get' | 'post', plan: TelemetryHttpPlan, seconds: number): Promise<AutocannonResult> {
  const c = CASES.find((x) => x.name === name)!;
  return new Promise((resolve, reject) =>
    autocannon(
      {
        url: `http://127.0.0.1:${t.port}${c.path(t.id)}`,
        method: c.method,
        headers: c.headers,
        body: c.body,
        connections: plan.connections,
        pipelining: plan.pipelining,
        duration: seconds,
        timeout: 10,
      },
      (err, res) => {
        if (err) return reject(err);
        if (res.non2xx > 0 || res.errors > 0 || res.timeouts > 0) return reject(new Error(`telemetry http ${name}: ${res.non2xx} non-2xx, ${res.errors} errors, ${res.timeouts} timeouts`));
        resolve(res);
      },
    ),
  );
}

/** Until every generation the server accepted has completed (the POST runs until completed, as in the HTTP section). */
async function drain(child: ChildProcess): Promise<void> {
  const done = nextMessage(child, (m) => m?.type === 'drained', 600_000);
  child.send({ type: 'drain' });
  await done;
}

/** One run: the server's CPU µs and the requests it answered. */
async function run(t: Target, name: 'get' | 'post', plan: TelemetryHttpPlan): Promise<{ us: number; requests: number }> {
  const c0 = processCpuUs(t.child.pid!);
  const res = await fire(t, name, plan, plan.seconds);
  if (name === 'post') await drain(t.child);
  return { us: processCpuUs(t.child.pid!) - c0, requests: res.requests.total };
}

async function measure(plan: TelemetryHttpPlan): Promise<TelemetryHttpResult> {
  const sums = { get: { off: { us: 0, n: 0 }, on: { us: 0, n: 0 }, ratios: [] as number[] }, post: { off: { us: 0, n: 0 }, on: { us: 0, n: 0 }, ratios: [] as number[] } };
  for (let pair = 0; pair < plan.pairs; pair++) {
    const servers = {} as Record<Mode, Target>;
    try {
      servers.off = await startServer('fastify', 'ours');
      servers.on = await startServer('fastify', 'ours', true);
      for (const mode of ['off', 'on'] as const) {
        for (const name of ['get', 'post'] as const) {
          await fire(servers[mode], name, plan, plan.warmup);
          if (name === 'post') await drain(servers[mode].child);
        }
      }
      for (const name of ['get', 'post'] as const) {
        for (let i = 0; i < plan.runs; i++) {
          const order: Mode[] = (i + pair) % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
          const perRequest: Record<Mode, number> = { off: 0, on: 0 };
          for (const mode of order) {
            const r = await run(servers[mode], name, plan);
            sums[name][mode].us += r.us;
            sums[name][mode].n += r.requests;
            perRequest[mode] = r.us / r.requests;
          }
          sums[name].ratios.push(perRequest.on / perRequest.off);
        }
      }
      // The "on" server really recorded: its scrape counts the requests and the runs.
      const scraped = nextMessage<{ text: string }>(servers.on.child, (m) => m?.type === 'scraped', 30_000);
      servers.on.child.send({ type: 'scrape' });
      const { text } = await scraped;
      if (!/genservice_http_requests_total\{route="\/v1\/generations\/\{id\}",status="200"\} [1-9]/.test(text) || !/genservice_generation_run_seconds_count\{model="[^"]+"\} [1-9]/.test(text)) {
        throw new Error('telemetry http: the metrics server recorded nothing');
      }
    } finally {
      await Promise.all(Object.values(servers).map((s) => stopChild(s.child)));
    }
  }
  const side = (name: 'get' | 'post') => ({ off: sums[name].off.us / sums[name].off.n, on: sums[name].on.us / sums[name].on.n, ratios: sums[name].ratios });
  return { get: side('get'), post: side('post') };
}

childLifecycle();
measure(JSON.parse(process.argv[2]!) as TelemetryHttpPlan).then(
  (data) => {
    send({ type: 'result', data });
    setTimeout(() => process.exit(0), 50);
  },
  (err: unknown) => {
    send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    setTimeout(() => process.exit(1), 50);
  },
);
