/**
 * Where an in-memory create's time goes (issue 36, "pay for what you use"): `POST /v1/generations` through
 * `service.handle` (no HTTP server, no framework), in-memory ports, the no-op provider, the runner on (concurrency 8),
 * 10 requests in flight at a time as the HTTP section's load does, each measured until every generation completed.
 * Prints µs of this process's CPU per generation (best of 5 rounds) and a V8 CPU profile of one more round. No budgets,
 * batches, webhooks, expiry or telemetry are configured: a create should do no work for them.
 *
 *   cd bench && node --conditions=@genservice/source --import tsx create-profile.ts [n]
 */
import os from 'node:os';
import path from 'node:path';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger } from '@genservice/core';
import { API_KEY, BALANCE, RUNNER_CONCURRENCY, USER_ID, VALID_BODY, noopProvider } from './lib/fixture.js';
import { formatProfile, profileHere } from './lib/profile.js';

const n = Number(process.argv[2] ?? 20_000);
const ledger = new MemoryLedger({ balances: { [USER_ID]: BALANCE } });
let settled = 0;
const settle = ledger.settle.bind(ledger);
ledger.settle = async (id: string, amount: number) => {
  const r = await settle(id, amount);
  settled++;
  return r;
};
const service = createGenerationService({
  providers: [noopProvider],
  limits: { inFlightPerUser: 10_000_000 },
  apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: API_KEY, userId: USER_ID }] }),
  ledger,
  runner: { concurrency: RUNNER_CONCURRENCY },
  recovery: { onStart: false, intervalMs: 0 },
});
await service.start();
const req = { method: 'POST', path: '/v1/generations', headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' }, body: VALID_BODY };

async function round(count: number): Promise<number> {
  const target = settled + count;
  const cpu0 = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < count) {
        next++;
        const r = await service.handle(req);
        if (r.status !== 201) throw new Error(`POST answered ${r.status}`);
      }
    }),
  );
  while (settled < target) await new Promise((r) => setImmediate(r));
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / count;
}

await round(n / 2);
const rounds: number[] = [];
for (let i = 0; i < 5; i++) rounds.push(await round(n));
console.log(`create + run to completed, in-memory, in process: best ${Math.min(...rounds).toFixed(1)} µs CPU/generation (rounds ${rounds.map((r) => r.toFixed(1)).join(' ')})`);
const file = path.join(os.tmpdir(), `create-profile-${Date.now()}.cpuprofile`);
console.log(formatProfile(await profileHere(file, `in-memory POST /v1/generations until completed, ${n} generations`, () => round(n))));
await service.stop();
