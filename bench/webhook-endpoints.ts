/**
 * Create -> receipt latency of a `generation.completed` delivery on loopback, to a create's own webhook vs a registered
 * endpoint (issue 41), on the memory and SQLite stores: 300 generations each after 30 of warm-up, one at a time.
 *
 *   cd bench && node --conditions=@genservice/source --import tsx webhook-endpoints.ts
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger } from '@genservice/core';
import { createSqliteStores } from '@genservice/store-sqlite';

const waiters = new Map<string, (t: number) => void>();
const early = new Map<string, number>();
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const t = performance.now();
    res.writeHead(204).end();
    const id = JSON.parse(Buffer.concat(chunks).toString()).data.generationId as string;
    const w = waiters.get(id);
    if (w) w(t);
    else early.set(id, t);
  });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/h`;

async function run(label: string, durable: boolean, registered: boolean): Promise<void> {
  const sq = durable ? createSqliteStores({ filename: join(mkdtempSync(join(tmpdir(), 'we-bench-')), 'b.db') }) : undefined;
  const apiKeys = sq?.apiKeys ?? new MemoryApiKeyStore();
  await apiKeys.addKey('k', 'u');
  const ledger = sq?.ledger ?? new MemoryLedger();
  await ledger.credit('u', 1e9);
  const s = createGenerationService({
    providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 0.01, settings: [], price: 1 }], generate: async () => ({ text: 'x' }) }],
    apiKeys, ledger, ...(sq ? { store: sq.store, webhookStore: sq.webhookStore, idempotency: sq.idempotency, auditLog: sq.auditLog } : {}),
    recovery: { intervalMs: 0 },
    webhooks: { allowHttp: true, allowPrivateUrls: true, pollIntervalMs: 1000 },
  });
  await s.start();
  if (registered) await s.webhookEndpoints.create('u', { url, events: ['generation.completed'] });
  const lat: number[] = [];
  for (let i = 0; i < 330; i++) {
    const t0 = performance.now();
    const body = registered ? { modelId: 'm' } : { modelId: 'm', webhook: { url, events: ['generation.completed'] } };
    const r = await s.handle({ method: 'POST', path: '/v1/generations', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const id = JSON.parse(String(r.body)).generationId as string;
    const t1 = early.get(id) ?? (await new Promise<number>((resolve) => waiters.set(id, resolve)));
    if (i >= 30) lat.push(t1 - t0);
  }
  lat.sort((a, b) => a - b);
  console.log(`${label}: p50 ${lat[Math.floor(lat.length / 2)]!.toFixed(2)} ms, p95 ${lat[Math.floor(lat.length * 0.95)]!.toFixed(2)} ms (n=${lat.length})`);
  await s.stop();
  await sq?.close();
}
await run('memory, per-generation webhook', false, false);
await run('memory, registered endpoint   ', false, true);
await run('sqlite, per-generation webhook', true, false);
await run('sqlite, registered endpoint   ', true, true);
server.close();
