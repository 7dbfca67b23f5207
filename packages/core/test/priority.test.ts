/**
 * Priority of a create (issue 40, item 4): `low` / `normal` / `high`, priced by a multiplier of the model's price
 * (the service's, or the model's own), restricted by key scope where the host says, and a `low` one's deadline after
 * which it fails free. Over HTTP and the embedder API alike.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, InProcessQueue, MemoryApiKeyStore, MemoryLedger, type GenerationService, type GenerationServiceOptions } from '@genservice/core';
import type { EnqueueOptions, Job } from '@genservice/core/ports';
import { createFakeProvider, FakeClock, fakeModel, until } from '@genservice/testing';

const T0 = Date.UTC(2026, 0, 1);
const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop({ timeoutMs: 100 })));
});

function make(extra: Partial<GenerationServiceOptions> & { clock?: FakeClock } = {}) {
  const clock = extra.clock ?? new FakeClock(T0);
  const provider = createFakeProvider();
  const cheap = { models: [fakeModel({ modelId: 'tiered', price: 10, priorityMultipliers: { low: 0.5, high: 3 } })], generate: async () => ({ text: 'ok' }) };
  const ledger = new MemoryLedger({ balances: { alice: 1000 }, clock });
  const apiKeys = new MemoryApiKeyStore({ clock });
  const service = createGenerationService({
    providers: [provider, cheap],
    clock,
    ledger,
    apiKeys,
    recovery: { intervalMs: 60_000 },
    priority: { multipliers: { low: 0.8, high: 2 }, scoped: ['high'] },
    admin: { apiKeys: ['a'.repeat(32)] },
    ...extra,
  });
  services.push(service);
  return { service, clock, ledger, provider };
}

async function post(service: GenerationService, path: string, key: string, body: unknown) {
  const res = await service.handle({ method: 'POST', path, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: JSON.parse(String(res.body)) as Record<string, any> };
}

describe('priority', () => {
  it('prices each priority by its multiplier: the service default, or the model its own; quotes show it', async () => {
    const { service } = make();
    await service.start();
    expect(await service.quote('alice', { modelId: 'fake-text', priority: 'high' })).toMatchObject({ price: 2, priority: 'high', multiplier: 2 });
    expect(await service.quote('alice', { modelId: 'fake-text', priority: 'low' })).toMatchObject({ price: 0.8, multiplier: 0.8 });
    // A quote that asks no priority answers as before.
    expect(await service.quote('alice', { modelId: 'fake-text' })).toEqual({ price: 1, balance: 1000 });
    expect(await service.quote('alice', { modelId: 'tiered', priority: 'low' })).toMatchObject({ price: 5, multiplier: 0.5 });
    expect(await service.quote('alice', { modelId: 'tiered', priority: 'normal' })).toMatchObject({ price: 10, multiplier: 1 });
    const { generationId } = await service.create('alice', { modelId: 'tiered', priority: 'high' });
    expect(await until(() => service.details('alice', generationId), { accept: (g) => g.status === 'completed' })).toMatchObject({ price: 30 });
  });

  it('a restricted priority needs a key with the priority scope (403 otherwise); quotes answer alike', async () => {
    const { service } = make();
    await service.start();
    await service.accounts.createUser({ userId: 'bob', balance: 100 });
    const plain = await service.accounts.createKey('bob', { name: 'plain' });
    const scoped = await service.accounts.createKey('bob', { name: 'scoped', scopes: ['generate', 'read', 'priority'] });
    expect(plain.scopes).toEqual(['generate', 'read']);
    const refused = await post(service, '/v1/generations', plain.apiKey, { modelId: 'fake-text', priority: 'high' });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('forbidden');
    expect((await post(service, '/v1/quotes', plain.apiKey, { modelId: 'fake-text', priority: 'high' })).status).toBe(403);
    expect((await post(service, '/v1/generations', plain.apiKey, { modelId: 'fake-text', priority: 'low' })).status).toBe(201);
    const ok = await post(service, '/v1/generations', scoped.apiKey, { modelId: 'fake-text', priority: 'high' });
    expect(ok.status).toBe(201);
    const quote = await post(service, '/v1/quotes', scoped.apiKey, { modelId: 'fake-text', priority: 'high' });
    expect(quote).toMatchObject({ status: 200, body: { price: 2, priority: 'high', multiplier: 2 } });
    // Nothing was reserved for the refused create.
    expect(await service.balance('bob')).toBe(100 - 0.8 - 2);
  });

  it('checks priority and deadline: 400 naming the field, nothing stored or reserved', async () => {
    const { service, ledger } = make();
    await service.accounts.createUser({ userId: 'carl', balance: 10 });
    const { apiKey } = await service.accounts.createKey('carl', { name: 'k', scopes: ['generate', 'read', 'priority'] });
    const bad = async (body: Record<string, unknown>, field: string) => {
      const res = await post(service, '/v1/generations', apiKey, { modelId: 'fake-text', ...body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    };
    await bad({ priority: 'urgent' }, 'priority');
    await bad({ priority: 'high', deadline: new Date(T0 + 60_000).toISOString() }, 'deadline');
    await bad({ deadline: new Date(T0 + 60_000).toISOString() }, 'deadline');
    await bad({ priority: 'low', deadline: 'tomorrow' }, 'deadline');
    await bad({ priority: 'low', deadline: new Date(T0 - 1).toISOString() }, 'deadline');
    await bad({ priority: 'low', deadline: new Date(T0 + 31 * 86_400_000).toISOString() }, 'deadline');
    await bad({ priority: 'low', deadline: 5 }, 'deadline');
    expect(await ledger.account('carl')).toMatchObject({ balance: 10, reserved: 0 });
    expect((await service.list('carl')).data).toHaveLength(0);
  });

  it('a low generation not started by its deadline fails free (timeout), at claim or at recovery', async () => {
    // The runner never starts: recovery's pass is what finds it.
    const { service, clock, ledger } = make({ runner: { enabled: false } });
    await service.start();
    const deadline = new Date(T0 + 30_000).toISOString();
    const { generationId } = await service.create('alice', { modelId: 'fake-text', priority: 'low', deadline });
    expect(await ledger.account('alice')).toMatchObject({ reserved: 0.8 });
    await clock.advance(29_000);
    expect((await service.details('alice', generationId)).status).toBe('pending');
    await clock.advance(31_000);
    const failed = await until(() => service.details('alice', generationId), { accept: (g) => g.status === 'failed' });
    expect(failed).toMatchObject({ status: 'failed', price: 0, error: { code: 'timeout' } });
    expect(await ledger.account('alice')).toMatchObject({ balance: 1000, reserved: 0 });
  });

  it("a queue that drops the job's priority still fails a missed deadline free, at claim", async () => {
    // A queue that carries only the generation, model and owner (as an older queue would).
    class Forgetful extends InProcessQueue {
      override enqueue(job: Job, options?: EnqueueOptions): Promise<void> {
        const { priority: _dropped, ...rest } = job;
        return super.enqueue(rest, options);
      }
    }
    const clock0 = new FakeClock(T0);
    const { service, clock, ledger, provider } = make({ clock: clock0, queue: new Forgetful({ clock: clock0 }), runner: { concurrency: 1 }, recovery: { intervalMs: 0 } });
    await service.start();
    // The one slot is held, so the low one waits past its deadline.
    const held = await service.create('alice', { modelId: 'fake-held' });
    await until(async () => (await service.details('alice', held.generationId)).status === 'processing', 'the held run');
    const { generationId } = await service.create('alice', { modelId: 'fake-text', priority: 'low', deadline: new Date(T0 + 10_000).toISOString() });
    await clock.advance(11_000);
    provider.gate.open();
    const failed = await until(() => service.details('alice', generationId), { accept: (g) => g.status === 'failed' });
    expect(failed).toMatchObject({ price: 0, error: { code: 'timeout' } });
    expect(provider.callsFor(generationId)).toHaveLength(0);
    expect(await ledger.account('alice')).toMatchObject({ reserved: 0 });
  });

  it('a low generation with a deadline that a worker reaches in time runs and is charged', async () => {
    const { service, ledger } = make();
    await service.start();
    const { generationId } = await service.create('alice', { modelId: 'fake-text', priority: 'low', deadline: new Date(T0 + 3_600_000).toISOString() });
    expect(await until(() => service.details('alice', generationId), { accept: (g) => g.status === 'completed' })).toMatchObject({ price: 0.8 });
    expect(await ledger.account('alice')).toMatchObject({ balance: 999.2, reserved: 0 });
  });
});
