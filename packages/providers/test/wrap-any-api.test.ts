import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryLedger, type GenerationItem } from '@genservice/core';
import { createAcmeProvider } from './fixtures/wrap-any-api.js';
import { until } from '@genservice/testing';

// docs/connecting-models.md shows this provider; the doc's code block must be this file, byte for byte.
describe('the "wrap any HTTP API" example of docs/connecting-models.md', () => {
  it('is the code the doc shows', () => {
    const doc = readFileSync(new URL('../../../docs/connecting-models.md', import.meta.url), 'utf8');
    const code = readFileSync(new URL('./fixtures/wrap-any-api.ts', import.meta.url), 'utf8');
    expect(doc).toContain(`\`\`\`ts\n${code}\`\`\``);
  });

  const jobs = new Map<string, { prompt: string; polls: number; deleted: boolean }>();
  const progress: number[] = [];
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        if (req.headers.authorization !== 'Bearer acme-key') return void res.writeHead(401).end();
        const id = /^\/jobs\/(\w+)$/.exec(req.url ?? '')?.[1];
        if (req.method === 'POST' && req.url === '/jobs') {
          const newId = `j${jobs.size + 1}`;
          jobs.set(newId, { prompt: JSON.parse(body).prompt, polls: 0, deleted: false });
          return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: newId }));
        }
        const job = id ? jobs.get(id) : undefined;
        if (!job) return void res.writeHead(404).end();
        if (req.method === 'DELETE') {
          job.deleted = true;
          return void res.writeHead(204).end();
        }
        job.polls++;
        const answer =
          job.prompt === 'bad'
            ? { state: 'error', error: 'the prompt was refused' }
            : job.polls < 3
              ? { state: 'running', percent: job.polls * 40 }
              : { state: 'done', text: `a story about ${job.prompt}` };
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  it('runs, reports progress, fails with the upstream reason', async () => {
    const provider = createAcmeProvider({ baseUrl: base, apiKey: 'acme-key' });
    // Quick checks for the test: the model's estimate drives the check interval.
    provider.models[0]!.estimatedGenerationTime = 0.05;
    const service = createGenerationService({ providers: [provider], ledger: new MemoryLedger({ balances: { u: 100 } }), recovery: { intervalMs: 0 } });
    await service.start();
    try {
      // Every read along the way records the progress it shows.
      const finish = (id: string): Promise<GenerationItem> =>
        until(async () => {
            const d = await service.details('u', id);
            if (d.progress) progress.push(d.progress.fraction);
            return d;
          }, { accept: (d) => d.status === 'completed' || d.status === 'failed' });
      const ok = await finish((await service.create('u', { modelId: 'acme-story', settings: { prompt: 'a fox' } })).generationId);
      expect(ok).toMatchObject({ status: 'completed', result: 'a story about a fox', price: 5 });
      expect(progress.some((p) => p > 0 && p < 1)).toBe(true);
      const bad = await finish((await service.create('u', { modelId: 'acme-story', settings: { prompt: 'bad' } })).generationId);
      expect(bad).toMatchObject({ status: 'failed', price: 1, error: { code: 'provider_error', message: 'the prompt was refused' } });
      expect(jobs.size).toBe(2);
    } finally {
      await service.stop({ timeoutMs: 1000 });
    }
  });
});
