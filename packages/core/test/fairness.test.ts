import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryLedger, type GenerationService } from '@genservice/core';
import { until } from '@genservice/testing';

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

describe('fair scheduling through the service', () => {
  it("with 2,000 queued for one user, another user's generation starts before the flooder's next 2 x concurrency", async () => {
    const concurrency = 4;
    const started: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }],
          generate: async (_input, ctx) => {
            started.push(ctx.generationId);
            await gate;
            return { text: 'ok' };
          },
        },
      ],
      ledger: new MemoryLedger({ balances: { flooder: 10_000, polite: 10 } }),
      runner: { concurrency },
      // The flood is the point here, not the in-flight cap (tested on its own).
      limits: { inFlightPerUser: 10_000 },
      recovery: { intervalMs: 0 },
    });
    services.push(service);
    await service.start();
    for (let i = 0; i < 2000; i++) await service.create('flooder', { modelId: 'm' });
    await until(async () => started.length, { accept: (n) => n >= concurrency });
    expect(started).toHaveLength(concurrency);
    const { generationId } = await service.create('polite', { modelId: 'm' });
    open();
    await until(async () => started.includes(generationId), { accept: (seen) => seen, timeoutMs: 10_000 });
    const at = started.indexOf(generationId);
    expect(at).toBeGreaterThanOrEqual(concurrency);
    expect(at).toBeLessThan(concurrency + 2 * concurrency);
  });
});
