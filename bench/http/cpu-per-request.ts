/**
 * CPU time of the server process per request, ours and bare side by side: the steadier figure behind the HTTP rows
 * when the 2 cores are shared (requests/s moves with whatever else runs; CPU per request much less). Not part of
 * `pnpm bench`; run by hand when working on a gap (bench/notes.md quotes it):
 *
 *   cd bench && NODE_ENV=production node --import tsx http/cpu-per-request.ts <express|fastify|koa> <get|post|models> [variants] [seconds] [pipelining] [rounds]
 *
 * e.g. `... http/cpu-per-request.ts fastify post ours,bare 4 10 2`. POST runs until completed (the server drains after
 * the load, inside the measured CPU). Reads /proc/<pid>/stat, so Linux only. Each line gives the CPU split into user
 * and system time too. Environment: `CONNECTIONS` (default 50; the bench's HTTP rows use 10), `SERVER_NODE_ARGS`
 * (node flags for the servers, space-separated: `--trace-gc-nvp` to see each scavenge, or a V8 flag to try). Build the packages first
 * (`npx -y pnpm@10 --filter '@genservice-bench/bench^...' run build`): the servers load the built packages.
 */
import autocannon, { type Result as AutocannonResult } from 'autocannon';
import { readFileSync } from 'node:fs';
import { CASES, startServer, type Framework, type Target } from '../lib/http-cases.js';
import { nextMessage, stopChild } from '../lib/proc.js';

const [fw = 'fastify', kase = 'post', variantList = 'ours,bare', seconds = '4', pipelining = '10', roundsArg = '2'] = process.argv.slice(2);
const variants = variantList.split(',');
const duration = Number(seconds);
const pipe = Number(pipelining);
const rounds = Number(roundsArg);


const connections = Number(process.env.CONNECTIONS ?? 50);
const serverNodeArgs = (process.env.SERVER_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');

/** User and system CPU of a process so far, in µs (clock ticks of 10 ms). */
function cpuOf(pid: number): { user: number; system: number } {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { user: Number(f[11]) * 10_000, system: Number(f[12]) * 10_000 };
}

const found = CASES.find((x) => x.name === kase);
if (!found) throw new Error(`unknown case ${kase} (one of ${CASES.map((x) => x.name).join(', ')})`);
const c = found;

function fire(t: Target, secs: number): Promise<AutocannonResult> {
  return new Promise((resolve, reject) =>
    autocannon(
      { url: `http://127.0.0.1:${t.port}${c.path(t.id)}`, method: c.method, headers: c.headers, body: c.body, connections, pipelining: pipe, duration: secs },
      (e, r) => (e ? reject(e) : resolve(r)),
    ),
  );
}

async function drain(child: import('node:child_process').ChildProcess): Promise<number> {
  if (!c.untilCompleted) return 0;
  child.send({ type: 'drain' });
  return (await nextMessage<{ drainMs: number }>(child, (m) => m?.type === 'drained', 600_000)).drainMs;
}

const servers = new Map<string, Target>();
try {
  for (const v of variants) servers.set(v, await startServer(fw as Framework, v as 'ours' | 'bare', false, serverNodeArgs));
  for (const s of servers.values()) {
    await fire(s, 2);
    await drain(s.child);
  }
  for (let r = 0; r < rounds; r++) {
    for (const [v, s] of servers) {
      const c0 = cpuOf(s.child.pid!);
      const t0 = performance.now();
      const res = await fire(s, duration);
      const drainMs = await drain(s.child);
      const seconds = (performance.now() - t0) / 1000;
      const c1 = cpuOf(s.child.pid!);
      const n = res.requests.total;
      const user = (c1.user - c0.user) / n;
      const system = (c1.system - c0.system) / n;
      console.log(
        `${fw} ${kase} p${pipe} ${v}: ${Math.round(n / seconds)} req/s (drain ${drainMs.toFixed(0)} ms), ${(user + system).toFixed(1)} µs CPU/request (user ${user.toFixed(1)}, system ${system.toFixed(1)}), non-2xx ${res.non2xx}`,
      );
    }
  }
} finally {
  for (const s of servers.values()) await stopChild(s.child);
}
process.exit(0);
