/**
 * In-process cost of one authenticated GET /v1/generations/:id through `service.handle` (no HTTP server): best of 6
 * rounds of 30k calls after a 20k warm-up. A quick A/B between commits when the HTTP section's ratios move:
 *
 *   cd bench && node --conditions=@genservice/source --import tsx get-inprocess.ts
 */
import { createGenerationService, MemoryApiKeyStore } from '@genservice/core';
const keys = new MemoryApiKeyStore({ keys: [{ apiKey: 'k1', userId: 'u' }] });
const s = createGenerationService({ providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 0 }], generate: async () => ({ text: 'x' }) }], apiKeys: keys, runner: { enabled: false } });
const c = await s.create('u', { modelId: 'm' });
const req = { method: 'GET', path: `/v1/generations/${c.generationId}`, headers: { authorization: 'Bearer k1' } };
for (let i = 0; i < 20000; i++) await s.handle(req);
const best: number[] = [];
for (let r = 0; r < 6; r++) {
  const t = process.hrtime.bigint();
  for (let i = 0; i < 30000; i++) await s.handle(req);
  best.push(Number(process.hrtime.bigint() - t) / 30000 / 1000);
}
console.log('GET µs best', Math.min(...best).toFixed(2), best.map((b) => b.toFixed(2)).join(' '));
await s.stop();
