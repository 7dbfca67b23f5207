import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createGenerationService, MemoryGenerationStore, MemoryLedger, type ModelProvider } from '@genservice/core';
import { until } from '@genservice/testing';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** The code blocks of the docs marked `<!-- tested: docs.test.ts -->`, written out as modules and run. */
function testedBlock(doc: string): string {
  const text = readFileSync(`${root}docs/${doc}`, 'utf8');
  const m = /<!-- tested: docs\.test\.ts -->\s*```ts\n([\s\S]*?)```/.exec(text);
  if (!m) throw new Error(`no tested block in docs/${doc}`);
  return m[1]!;
}


describe('docs/writing-a-provider.md', () => {
  it('its provider example runs as documented', async () => {
    const dir = `${root}packages/core/test/.generated`;
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/provider-example.ts`, testedBlock('writing-a-provider.md'));
    const { shoutProvider } = (await import(`${dir}/provider-example.ts`)) as { shoutProvider: ModelProvider };
    const ledger = new MemoryLedger({ balances: { u: 100 } });
    const store = new MemoryGenerationStore();
    const service = createGenerationService({ providers: [shoutProvider], ledger, store, publicUrl: 'https://api.example.com/gen', runner: { retryBaseDelayMs: 1 } });
    await service.start();
    try {
      const a = await service.create('u', { modelId: 'shout-1', settings: { prompt: 'hi', volume: 'louder' } });
      expect(await until(() => service.get('u', a.generationId), { accept: (g) => g.status === 'completed' })).toEqual({ status: 'completed', result: 'HI!!!', price: 3 });
      const b = await service.create('u', { modelId: 'badge-1', settings: { prompt: 'hello' } });
      const badge = await until(() => service.get('u', b.generationId), { accept: (g) => g.status === 'completed' });
      expect(badge.result).toMatch(/^https:\/\/api\.example\.com\/gen\/v1\/files\//);
      const c = await service.create('u', { modelId: 'shout-1', settings: { prompt: 'upstream busy' } });
      expect(await until(() => service.get('u', c.generationId), { accept: (g) => g.status === 'failed' })).toEqual({ status: 'failed', price: 1 });
      expect((await service.details('u', c.generationId)).error).toEqual({ code: 'provider_error', message: 'The badge service is busy; try again in a minute.' });
      // The progress it reported is in its log; once completed its progress reads 1.
      expect((await store.eventsOf(b.generationId)).filter((e) => e.type === 'progress').map((e) => e.data)).toEqual([{ fraction: 0.5, message: 'rendering' }]);
      expect((await service.details('u', b.generationId)).progress).toEqual({ fraction: 1 });
      expect(await ledger.account('u')).toEqual({ balance: 91, reserved: 0, settled: 9 });
    } finally {
      await service.stop();
    }
  });
});
