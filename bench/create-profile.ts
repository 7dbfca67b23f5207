/**
 * Where an in-memory create's time goes (issue 36, "pay for what you use"): `POST /v1/generations` through
 * `service.handle` (no HTTP server, no framework), in-memory ports, the no-op provider, the runner on (concurrency 8),
 * 10 requests in flight at a time as the HTTP section's load does, each measured until every generation completed.
 * Prints µs of this process's CPU per generation (best of 5 rounds), a V8 CPU profile of one more round, and the bytes
 * allocated per generation in one more (V8's sampling heap profiler, every 512 bytes: a figure that does not move with
 * the machine's load, where the CPU figures do; every byte allocated is work for the young-generation GC). No budgets,
 * batches, webhooks, expiry or telemetry are configured: a create should do no work for them.
 *
 *   cd bench && node --conditions=@genservice/source --import tsx create-profile.ts [n]
 */
import { Session } from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import * as Core from '@genservice/core';
import { USER_ID } from './lib/fixture.js';
import { inProcessService } from './lib/in-process.js';
import { formatProfile, profileHere } from './lib/profile.js';
import { postTenAtATime } from './lib/posts.js';
import { settledCount } from './lib/settled.js';

const n = Number(process.argv[2] ?? 20_000);
const { service, ledger, post: req } = await inProcessService(Core);
// Counted from the user's account (lib/settled.ts): a replaced `settle` would change the path measured.
const tokens = settledCount(ledger, USER_ID);

async function round(count: number): Promise<number> {
  const target = (await tokens.settled()) + count;
  const cpu0 = process.cpuUsage();
  await postTenAtATime(service, req, count);
  while ((await tokens.settled()) < target) await new Promise((r) => setImmediate(r));
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / count;
}

await round(n / 2);
const rounds: number[] = [];
for (let i = 0; i < 5; i++) rounds.push(await round(n));
console.log(`create + run to completed, in-memory, in process: best ${Math.min(...rounds).toFixed(1)} µs CPU/generation (rounds ${rounds.map((r) => r.toFixed(1)).join(' ')})`);
const file = path.join(os.tmpdir(), `create-profile-${Date.now()}.cpuprofile`);
if (!process.env.NO_PROFILE) console.log(formatProfile(await profileHere(file, `in-memory POST /v1/generations until completed, ${n} generations`, () => round(n))));

/** Bytes allocated per generation over one round, and the functions that allocate most (self, bytes per generation). */
async function allocation(count: number): Promise<string> {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await round(count);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  session.disconnect();
  type Node = { callFrame: { functionName: string; url: string; lineNumber: number }; selfSize: number; children: Node[] };
  const self = new Map<string, number>();
  let total = 0;
  const walk = (node: Node): void => {
    const { functionName, url, lineNumber } = node.callFrame;
    const where = `${functionName || '(anonymous)'} ${url.split('/').slice(-3).join('/')}:${lineNumber + 1}`;
    total += node.selfSize;
    self.set(where, (self.get(where) ?? 0) + node.selfSize);
    for (const c of node.children) walk(c);
  };
  walk(profile.head as unknown as Node);
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 15);
  return [`allocated: ${(total / count).toFixed(0)} bytes/generation; most by (self, bytes/generation):`, ...top.map(([k, v]) => `  ${(v / count).toFixed(0).padStart(6)}  ${k}`)].join('\n');
}
if (!process.env.NO_PROFILE) console.log(await allocation(n));
await service.stop();
