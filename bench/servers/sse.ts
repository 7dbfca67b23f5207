/**
 * The server side of the idle-stream memory figure: a service on plain node:http (core's adapter plumbing) with one
 * generation held in `processing`, so every stream opened on it stays open and idle. Answers `{ type: 'memory' }` with
 * its heap and RSS after a full GC.
 */
import { createServer } from 'node:http';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger } from '@genservice/core';
import { isApiPath, readRawBody, writeNodeResponse } from '@genservice/core/adapter';
import { send } from '../lib/proc.js';

const service = createGenerationService({
  providers: [
    {
      models: [{ modelId: 'hold', title: 'Hold', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
      generate: (_input, ctx) => new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))),
    },
  ],
  apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'bench-key', userId: 'u' }] }),
  ledger: new MemoryLedger({ balances: { u: 10 } }),
  recovery: { intervalMs: 0 },
  // Every stream is one user's: the caps (20 a user, 5 000 a process by default) would refuse most of them.
  limits: { streamsPerUser: 1_000_000, streamsTotal: 1_000_000 },
});
await service.start();
const { generationId } = await service.create('u', { modelId: 'hold' });

const server = createServer(async (req, res) => {
  const path = req.url ?? '/';
  if (!isApiPath(path.split('?')[0]!)) return void res.writeHead(404).end();
  const raw = await readRawBody(req, service.bodyLimit, req.headers['content-length']);
  const out = await service.handle({ method: req.method ?? 'GET', path, headers: req.headers, ...(raw === null ? { bodyError: 'payload_too_large' as const } : { body: raw }) });
  await writeNodeResponse(res, out);
});
server.maxConnections = 20_000;
server.keepAliveTimeout = 0;
server.listen(0, '127.0.0.1', () => {
  send({ type: 'ready', port: (server.address() as { port: number }).port, id: generationId });
});
process.on('message', (m: { type?: string }) => {
  if (m?.type !== 'memory') return;
  for (let i = 0; i < 3; i++) (globalThis as { gc?: () => void }).gc?.();
  const u = process.memoryUsage();
  send({ type: 'memory', heapUsed: u.heapUsed, rss: u.rss, external: u.external, streams: service.stats().openStreams });
});
