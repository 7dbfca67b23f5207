/**
 * CPU time of the server process per request, ours and bare side by side: the steadier figure behind the HTTP rows
 * when the 2 cores are shared (requests/s moves with whatever else runs; CPU per request much less). Not part of
 * `pnpm bench`; run by hand when working on a gap (bench/notes.md quotes it):
 *
 *   cd bench && NODE_ENV=production node --import tsx http/cpu-per-request.ts <express|fastify|koa> <get|post|models> [variants] [seconds] [pipelining] [rounds]
 *
 * e.g. `... http/cpu-per-request.ts fastify post ours,bare 4 10 2`. POST runs until completed (the server drains after
 * the load, inside the measured CPU). Reads /proc, so Linux only. Each line gives the CPU split into user and system
 * time, by thread (`main` against the `node` helper threads, where V8's parallel and concurrent GC work runs), the
 * read and write system calls and the minor page faults per request. Environment: `CONNECTIONS` (default 50; the bench's HTTP rows use 10),
 * `SERVER_NODE_ARGS` (node flags for the servers, space-separated: a V8 flag to try), `GC_TRACE=1` (the servers run
 * with `--trace-gc-nvp`, and each line is followed by what the GC did per request: bytes allocated, surviving a
 * scavenge and promoted to the old generation, and the main thread's pauses), `GENTLE_WARMUP=<s>` (warm up with one
 * connection and no pipelining for that long instead of 2 s at full load, so the first thing a server sees is not a
 * burst of 100 requests: see bench/notes.md on V8's pretenuring). Build the packages first
 * (`npx -y pnpm@10 --filter '@genservice-bench/bench^...' run build`): the servers load the built packages.
 */
import autocannon, { type Result as AutocannonResult } from 'autocannon';
import { readdirSync, readFileSync } from 'node:fs';
import { CASES, startServer, type Framework, type Target } from '../lib/http-cases.js';
import { nextMessage, stopChild } from '../lib/proc.js';

const [fw = 'fastify', kase = 'post', variantList = 'ours,bare', seconds = '4', pipelining = '10', roundsArg = '2'] = process.argv.slice(2);
const variants = variantList.split(',');
const duration = Number(seconds);
const pipe = Number(pipelining);
const rounds = Number(roundsArg);


const connections = Number(process.env.CONNECTIONS ?? 50);
const gcTrace = process.env.GC_TRACE === '1';
const gentle = Number(process.env.GENTLE_WARMUP ?? 0);
const serverNodeArgs = [...(gcTrace ? ['--trace-gc-nvp'] : []), ...(process.env.SERVER_NODE_ARGS ?? '').split(' ').filter((a) => a !== '')];

/** Sums of a server's `--trace-gc-nvp` lines so far, by kind: scavenges (`s`) and full GCs (`mc`, `ms`). */
interface GcSums {
  scavenges: number;
  scavengeMs: number;
  fullGcs: number;
  fullMs: number;
  allocated: number;
  survived: number;
  promoted: number;
}
const gcSums = new Map<string, GcSums>();

/** Reads a quiet server's output line by line, adding up its GC trace. */
function followGc(variant: string, t: Target): void {
  const sums: GcSums = { scavenges: 0, scavengeMs: 0, fullGcs: 0, fullMs: 0, allocated: 0, survived: 0, promoted: 0 };
  gcSums.set(variant, sums);
  let rest = '';
  t.child.stdout?.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString('utf8')).split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.includes(' gc=')) continue;
      const field = (name: string): number => Number(new RegExp(`\\b${name}=([\\d.]+)`).exec(line)?.[1] ?? 0);
      const kind = /\bgc=(\w+)/.exec(line)?.[1];
      if (kind === 's') {
        sums.scavenges++;
        sums.scavengeMs += field('pause');
        sums.survived += field('new_space_survived') || field('semi_space_copied');
      } else {
        sums.fullGcs++;
        sums.fullMs += field('pause');
      }
      sums.allocated += field('allocated');
      sums.promoted += field('promoted');
    }
  });
}

/** Per request between two readings: what the young-generation GC kept (survived, promoted) and the main thread's pauses. */
function gcPerRequest(before: GcSums, after: GcSums, n: number): string {
  const d = (k: keyof GcSums): number => (after[k] - before[k]) / n;
  return `gc/request: allocated ${d('allocated').toFixed(0)} B, survived ${d('survived').toFixed(0)} B, promoted ${d('promoted').toFixed(0)} B, scavenge pause ${(d('scavengeMs') * 1000).toFixed(1)} µs, full-GC pause ${(d('fullMs') * 1000).toFixed(1)} µs (${after.scavenges - before.scavenges} scavenges, ${after.fullGcs - before.fullGcs} full)`;
}

/** User and system CPU of a process so far, in µs (clock ticks of 10 ms), and its minor page faults. */
function cpuOf(pid: number): { user: number; system: number; faults: number } {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { user: Number(f[11]) * 10_000, system: Number(f[12]) * 10_000, faults: Number(f[7]) };
}

/** Read and write system calls of a process so far (/proc/<pid>/io): a write per response, or several coalesced. */
function syscallsOf(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string): number => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? 0);
  return { reads: field('syscr'), writes: field('syscw') };
}

/** CPU (µs) of each thread of a process by name: the main thread against V8's and libuv's helper threads. */
function threadsOf(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.split(') ')[1]!.split(' ');
      out.set(name, (out.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) * 10_000);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

const found = CASES.find((x) => x.name === kase);
if (!found) throw new Error(`unknown case ${kase} (one of ${CASES.map((x) => x.name).join(', ')})`);
const c = found;

function fire(t: Target, secs: number, conns = connections, pipes = pipe): Promise<AutocannonResult> {
  return new Promise((resolve, reject) =>
    autocannon(
      { url: `http://127.0.0.1:${t.port}${c.path(t.id)}`, method: c.method, headers: c.headers, body: c.body, connections: conns, pipelining: pipes, duration: secs },
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
  for (const v of variants) {
    const t = await startServer(fw as Framework, v as 'ours' | 'bare', false, serverNodeArgs, gcTrace);
    if (gcTrace) followGc(v, t);
    servers.set(v, t);
  }
  for (const s of servers.values()) {
    // GENTLE_WARMUP=<s>: warmed up by one connection without pipelining, so no burst of 100 requests comes first.
    if (gentle > 0) await fire(s, gentle, 1, 1);
    else await fire(s, 2);
    await drain(s.child);
  }
  for (let r = 0; r < rounds; r++) {
    for (const [v, s] of servers) {
      const c0 = cpuOf(s.child.pid!);
      const io0 = syscallsOf(s.child.pid!);
      const th0 = threadsOf(s.child.pid!);
      const gc0 = { ...(gcSums.get(v) as GcSums) };
      const t0 = performance.now();
      const res = await fire(s, duration);
      const drainMs = await drain(s.child);
      const seconds = (performance.now() - t0) / 1000;
      const c1 = cpuOf(s.child.pid!);
      const io1 = syscallsOf(s.child.pid!);
      const th1 = threadsOf(s.child.pid!);
      // The last scavenge's line may still be on its way: a moment for it.
      if (gcTrace) await new Promise((r) => setTimeout(r, 50));
      const n = res.requests.total;
      const user = (c1.user - c0.user) / n;
      const system = (c1.system - c0.system) / n;
      console.log(
        `${fw} ${kase} p${pipe} ${v}: ${Math.round(n / seconds)} req/s (drain ${drainMs.toFixed(0)} ms), ${(user + system).toFixed(1)} µs CPU/request (user ${user.toFixed(1)}, system ${system.toFixed(1)}), threads ${[...th1].map(([k, v]) => `${k} ${((v - (th0.get(k) ?? 0)) / n).toFixed(1)}`).join(', ')}, syscalls/request read ${((io1.reads - io0.reads) / n).toFixed(2)} write ${((io1.writes - io0.writes) / n).toFixed(2)}, page faults/request ${((c1.faults - c0.faults) / n).toFixed(2)}`,
      );
      if (gcTrace) console.log(`  ${v} ${gcPerRequest(gc0, gcSums.get(v)!, n)}`);
    }
  }
} finally {
  for (const s of servers.values()) await stopChild(s.child);
}
process.exit(0);
