/**
 * The HTTP part, run as its own process pinned to core 1 (the servers run pinned to core 0). Starts, per framework,
 * our server and the bare one side by side, checks that they answer the same, warms both up, then measures every
 * case with autocannon alternately (ours, bare, ours, bare, ...), and sends the averages back over IPC. The POST case
 * runs until completed: after each run the server drains (every generation it accepted completes), and that time counts.
 *
 * Any unexpected status, socket error or timeout in a measured run aborts the bench: a fast 500 is not a result.
 *
 * argv[2] is a JSON plan: `{ mode: 'measure', frameworks, duration, warmup, rounds, pipelinings, connections }`
 * or `{ mode: 'profile', framework, case, pipelining, duration, warmup, connections, file }`.
 */
import autocannon, { type Result as AutocannonResult } from 'autocannon';
import { isDeepStrictEqual } from 'node:util';
import { childLifecycle, nextMessage, send, stopChild } from '../lib/proc.js';
import { CASES, startServer, type CaseDef, type CaseName, type Framework, type Target } from '../lib/http-cases.js';
import type { HttpCaseResult } from '../lib/types.js';

export type { CaseName, Framework } from '../lib/http-cases.js';

async function smoke(framework: Framework, ours: Target, bare: Target): Promise<void> {
  const bodies: Record<string, unknown> = {};
  const headerNames: Record<string, string> = {};
  for (const c of CASES) {
    for (const [variant, t] of [['ours', ours], ['bare', bare]] as const) {
      if (variant === 'bare' && !c.bare) continue;
      const res = await fetch(`http://127.0.0.1:${t.port}${c.path(t.id)}`, { method: c.method, headers: c.headers, body: c.body });
      const text = await res.text();
      if (res.status !== c.status) {
        throw new Error(`${framework} ${variant} ${c.name}: expected ${c.status}, got ${res.status}: ${text.slice(0, 300)}`);
      }
      bodies[`${c.name}.${variant}`] = JSON.parse(text);
      headerNames[`${c.name}.${variant}`] = [...(res.headers as unknown as Map<string, string>).keys()].sort().join(', ');
    }
  }
  // The same bytes on the wire: the bare side sends the headers ours does (servers/common.ts, bareHeaders).
  for (const c of CASES) {
    if (!c.bare) continue;
    if (headerNames[`${c.name}.ours`] !== headerNames[`${c.name}.bare`]) {
      throw new Error(`${framework} ${c.name}: ours and bare send different headers: ${headerNames[`${c.name}.ours`]} vs ${headerNames[`${c.name}.bare`]}`);
    }
  }
  for (const name of ['get', 'models']) {
    if (!isDeepStrictEqual(bodies[`${name}.ours`], bodies[`${name}.bare`])) {
      throw new Error(
        `${framework} ${name}: ours and bare answer different JSON: ${JSON.stringify(bodies[`${name}.ours`])} vs ${JSON.stringify(bodies[`${name}.bare`])}`,
      );
    }
  }
  const invalid = bodies['invalid.ours'] as { error?: { code?: string } };
  if (invalid.error?.code !== 'invalid_settings') throw new Error(`${framework}: the invalid case answered ${JSON.stringify(invalid)}`);
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * One autocannon run. Latencies are taken from autocannon's per-response event (hrtime, in ms with decimals):
 * its own histogram keeps whole milliseconds only, too coarse for sub-millisecond answers.
 */
async function fire(t: Target, c: CaseDef, pipelining: number, duration: number, connections: number, check: boolean): Promise<HttpCaseResult> {
  let lat = new Float64Array(1 << 16);
  let n = 0;
  const r = await new Promise<AutocannonResult>((resolve, reject) => {
    const inst = autocannon(
      {
        url: `http://127.0.0.1:${t.port}${c.path(t.id)}`,
        method: c.method,
        headers: c.headers,
        body: c.body,
        connections,
        pipelining,
        duration,
        timeout: 10,
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    inst.on('response', (_client, _status, _bytes, ms) => {
      if (n === lat.length) {
        const bigger = new Float64Array(lat.length * 2);
        bigger.set(lat);
        lat = bigger;
      }
      lat[n++] = ms;
    });
  });
  let drainMs = 0;
  if (c.untilCompleted) {
    t.child.send({ type: 'drain' });
    const d = await nextMessage<{ drainMs: number; created: number; failed: number }>(t.child, (m) => m?.type === 'drained', 10 * 60_000);
    if (d.failed > 0) throw new Error(`${c.name} on port ${t.port}: ${d.failed} generations failed`);
    drainMs = d.drainMs;
  }
  if (check) {
    const codes = Object.keys(r.statusCodeStats);
    const bad = codes.filter((code) => Number(code) !== c.status);
    if (bad.length > 0 || r.errors > 0 || r.timeouts > 0 || (c.status < 300 && r.non2xx > 0)) {
      throw new Error(
        `${c.name} on port ${t.port}: unexpected answers (expected only ${c.status}): statuses ${JSON.stringify(r.statusCodeStats)}, ` +
          `non2xx ${r.non2xx}, errors ${r.errors}, timeouts ${r.timeouts}`,
      );
    }
    if (r.requests.total === 0) throw new Error(`${c.name} on port ${t.port}: no request completed`);
  }
  const sorted = lat.subarray(0, n).sort();
  // Until completed: every request of the run over the load time plus the time until its last generation finished.
  const rps = c.untilCompleted ? r.requests.total / (r.duration + drainMs / 1000) : r.requests.average;
  return { rps, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), total: r.requests.total, ...(c.untilCompleted ? { drainMs } : {}) };
}

/**
 * The best round (highest requests/s) with its own latencies. The machine is shared: other work only ever slows a
 * run down, so the best of alternated rounds is the closest to what each side can do.
 */
function best(xs: HttpCaseResult[]): HttpCaseResult {
  return xs.reduce((a, b) => (b.rps > a.rps ? b : a));
}

interface MeasurePlan {
  mode: 'measure';
  frameworks: Framework[];
  duration: number;
  warmup: number;
  rounds: number;
  pipelinings: number[];
  connections: number;
}

/** results[framework][pipelining][`${case}.${variant}`] */
export type HttpResults = Record<string, Record<string, Record<string, HttpCaseResult>>>;

async function measure(plan: MeasurePlan): Promise<HttpResults> {
  const out: HttpResults = {};
  for (const fw of plan.frameworks) {
    const ours = await startServer(fw, 'ours');
    const bare = await startServer(fw, 'bare');
    try {
      await smoke(fw, ours, bare);
      console.log(`[http] ${fw}: servers up (ours :${ours.port}, bare :${bare.port}), warming up`);
      for (const c of CASES) {
        await fire(ours, c, 10, plan.warmup, plan.connections, true);
        if (c.bare) await fire(bare, c, 10, plan.warmup, plan.connections, true);
      }
      const runs: Record<string, Record<string, HttpCaseResult[]>> = {};
      for (let round = 0; round < plan.rounds; round++) {
        for (const p of plan.pipelinings) {
          const per = (runs[p] ??= {});
          for (const c of CASES) {
            // Odd rounds measure the bare side first, so drift over time does not favour one side.
            const order: Array<['ours' | 'bare', Target]> = c.bare
              ? round % 2 === 0
                ? [['ours', ours], ['bare', bare]]
                : [['bare', bare], ['ours', ours]]
              : [['ours', ours]];
            for (const [variant, t] of order) {
              const r = await fire(t, c, p, plan.duration, plan.connections, true);
              (per[`${c.name}.${variant}`] ??= []).push(r);
              console.log(
                `[http] ${fw} p${p} round ${round + 1} ${c.name}.${variant}: ${Math.round(r.rps)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms${r.drainMs !== undefined ? `, drain ${r.drainMs.toFixed(0)} ms` : ''}`,
              );
            }
          }
        }
      }
      out[fw] = Object.fromEntries(
        Object.entries(runs).map(([p, per]) => [p, Object.fromEntries(Object.entries(per).map(([k, xs]) => [k, best(xs)]))]),
      );
    } finally {
      await stopChild(ours.child);
      await stopChild(bare.child);
    }
  }
  return out;
}

interface ProfilePlan {
  mode: 'profile';
  /** Default ours; bare profiles the baseline server, for comparison. */
  variant?: 'ours' | 'bare';
  framework: Framework;
  case: CaseName;
  pipelining: number;
  duration: number;
  warmup: number;
  connections: number;
  file: string;
}

async function profile(plan: ProfilePlan): Promise<string> {
  const c = CASES.find((x) => x.name === plan.case);
  if (!c) throw new Error(`unknown case ${plan.case}`);
  const ours = await startServer(plan.framework, plan.variant ?? 'ours');
  try {
    await fire(ours, c, plan.pipelining, plan.warmup, plan.connections, true);
    ours.child.send({ type: 'profile-start' });
    await nextMessage(ours.child, (m) => m?.type === 'profile-started', 30_000);
    const measured = await fire(ours, c, plan.pipelining, plan.duration, plan.connections, true);
    ours.child.send({ type: 'profile-stop', file: plan.file });
    // The profile's request count, to turn its milliseconds into µs per request.
    console.error(`[profile] ${plan.framework} ${plan.variant ?? 'ours'} ${plan.case}: ${measured.total} requests`);
    await nextMessage(ours.child, (m) => m?.type === 'profile-stopped', 60_000);
    return plan.file;
  } finally {
    await stopChild(ours.child);
  }
}

async function main(): Promise<void> {
  childLifecycle();
  const plan = JSON.parse(process.argv[2] ?? '{}') as MeasurePlan | ProfilePlan;
  let data: unknown;
  if (plan.mode === 'measure') data = await measure(plan);
  else if (plan.mode === 'profile') data = await profile(plan);
  else throw new Error(`unknown plan ${process.argv[2]}`);
  if (process.send) process.send({ type: 'result', data }, () => process.exit(0));
  else console.log(JSON.stringify(data, null, 2));
}

main().catch((err: unknown) => {
  send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  console.error(err);
  setTimeout(() => process.exit(1), 100);
});
