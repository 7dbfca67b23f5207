import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryLedger, ProviderError, type GenerationService, type ModelDefinition, type ModelProvider } from '@genservice/core';
import { until } from '@genservice/testing';
import { Circuit } from '../src/runner/fallbacks.js';

const text = (modelId: string, price: number, extra: Partial<ModelDefinition> = {}): ModelDefinition => ({
  modelId,
  title: modelId,
  resultType: 'text',
  estimatedGenerationTime: 0.01,
  settings: [],
  price,
  failureFee: 1,
  maxAttempts: 2,
  ...extra,
});

const services: GenerationService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.stop({ timeoutMs: 1000 });
});

function settled(service: GenerationService, id: string): Promise<{ status: string; price?: number; result?: string }> {
  return until(() => service.get('alice', id), { accept: (g) => g.status === 'completed' || g.status === 'failed', what: `${id} to finish` });
}

describe('Circuit (a provider circuit breaker, on a fake clock)', () => {
  it('opens after the threshold of failures in a row, lets one trial through after openMs, closes on its success', () => {
    let now = 1_000;
    const c = new Circuit(3, 500, () => now);
    expect(c.state).toBe('closed');
    c.failed();
    c.failed();
    c.succeeded(); // a success in between resets the count
    c.failed();
    c.failed();
    expect(c.state).toBe('closed');
    expect(c.tryAcquire()).toBe(true);
    c.failed();
    expect(c.state).toBe('open');
    expect(c.tryAcquire()).toBe(false);
    now += 499;
    expect(c.tryAcquire()).toBe(false);
    now += 1;
    expect(c.state).toBe('half_open');
    expect(c.tryAcquire()).toBe(true); // the trial
    expect(c.tryAcquire()).toBe(false); // only one at a time
    c.succeeded();
    expect(c.state).toBe('closed');
    expect(c.tryAcquire()).toBe(true);
  });

  it('opens again for a full period when the half-open trial fails; a trial without a verdict is freed', () => {
    let now = 0;
    const c = new Circuit(1, 100, () => now);
    c.failed();
    expect(c.state).toBe('open');
    now = 100;
    expect(c.tryAcquire()).toBe(true);
    c.failed();
    expect(c.state).toBe('open');
    now = 199;
    expect(c.tryAcquire()).toBe(false);
    now = 200;
    expect(c.tryAcquire()).toBe(true);
    c.release(); // aborted, or a non-retryable error: no verdict
    expect(c.tryAcquire()).toBe(true);
  });
});

describe('fallbacks', () => {
  function setup(options: { primaryFails: () => Error | null; stablePrice?: number; threshold?: number }) {
    const calls = { primary: 0, stable: 0 };
    const primary: ModelProvider = {
      models: [text('primary', 10, { fallbacks: ['stable'] })],
      generate: async () => {
        calls.primary++;
        const err = options.primaryFails();
        if (err) throw err;
        return { text: 'from primary' };
      },
    };
    const stable: ModelProvider = {
      models: [text('stable', options.stablePrice ?? 6)],
      generate: async () => {
        calls.stable++;
        return { text: 'from stable' };
      },
    };
    const ledger = new MemoryLedger({ balances: { alice: 100 } });
    const service = createGenerationService({
      providers: [primary, stable],
      ledger,
      runner: { retryBaseDelayMs: 1, retryMaxDelayMs: 2, circuit: { failureThreshold: options.threshold ?? 2, openMs: 60_000 } },
    });
    services.push(service);
    return { service, ledger, calls };
  }

  it('runs on the fallback after the provider fails retryably through its attempts, charged the fallback price', async () => {
    const { service, ledger, calls } = setup({ primaryFails: () => new ProviderError('upstream 503', { retryable: true }), threshold: 100 });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'primary' });
    expect(await settled(service, generationId)).toEqual({ status: 'completed', result: 'from stable', price: 6 });
    expect(calls).toEqual({ primary: 2, stable: 1 });
    expect(await service.details('alice', generationId)).toMatchObject({ modelId: 'primary', servedModelId: 'stable', price: 6 });
    expect(await ledger.account('alice')).toEqual({ balance: 94, reserved: 0, settled: 6 });
  });

  it('never charges more than was reserved, even when the fallback costs more', async () => {
    const { service, ledger } = setup({ primaryFails: () => new ProviderError('down', { retryable: true }), stablePrice: 25, threshold: 100 });
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'primary' });
    expect(await settled(service, generationId)).toEqual({ status: 'completed', result: 'from stable', price: 10 });
    expect(await ledger.account('alice')).toEqual({ balance: 90, reserved: 0, settled: 10 });
  });

  it('after an outage opens the circuit, later generations go straight to the fallback', async () => {
    const { service, calls } = setup({ primaryFails: () => new ProviderError('outage', { retryable: true }), threshold: 2 });
    await service.start();
    const first = await service.create('alice', { modelId: 'primary' });
    await settled(service, first.generationId);
    expect(calls).toEqual({ primary: 2, stable: 1 });
    for (let i = 0; i < 3; i++) {
      const { generationId } = await service.create('alice', { modelId: 'primary' });
      expect(await settled(service, generationId)).toEqual({ status: 'completed', result: 'from stable', price: 6 });
    }
    // The provider was marked unavailable: not called again while its circuit is open.
    expect(calls).toEqual({ primary: 2, stable: 4 });
  });

  it('does not fall back on a non-retryable failure, and shows no servedModelId when the model served itself', async () => {
    let fail = true;
    const { service, calls } = setup({ primaryFails: () => (fail ? new ProviderError('bad prompt', { retryable: false }) : null) });
    await service.start();
    const failed = await service.create('alice', { modelId: 'primary' });
    expect(await settled(service, failed.generationId)).toMatchObject({ status: 'failed', price: 1 });
    expect(calls).toEqual({ primary: 1, stable: 0 });
    fail = false;
    const ok = await service.create('alice', { modelId: 'primary' });
    expect(await settled(service, ok.generationId)).toEqual({ status: 'completed', result: 'from primary', price: 10 });
    expect(await service.details('alice', ok.generationId)).not.toHaveProperty('servedModelId');
  });

  it('refuses at startup a fallback that is missing, itself, or of another result type', () => {
    const provider = (models: ModelDefinition[]): ModelProvider => ({ models, generate: async () => ({ text: 'x' }) });
    expect(() => createGenerationService({ providers: [provider([text('a', 1, { fallbacks: ['nope'] })])] })).toThrow(/not a model/);
    expect(() => createGenerationService({ providers: [provider([text('a', 1, { fallbacks: ['a'] })])] })).toThrow(/itself/);
    expect(() =>
      createGenerationService({ providers: [provider([text('a', 1, { fallbacks: ['b'] }), { ...text('b', 1), resultType: 'image' }])] }),
    ).toThrow(/result type/);
  });
});
