import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, DomainError, MemoryApiKeyStore, MemoryAuditLog, MemoryLedger, type GenerationService } from '@genservice/core';
import type { Job, JobQueue, Ledger } from '@genservice/core/ports';
import { createScriptedProvider, fakeModel } from '@genservice/testing';

// Issue 40, item 1: a user's own budget and in-flight cap, set through `service.accounts`, held by every create's
// reserve with the balance, the key and the organisation.

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop()));
});

class KeepingQueue implements JobQueue {
  readonly jobs: Job[] = [];
  async enqueue(job: Job): Promise<void> {
    this.jobs.push(job);
  }
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
}

function make(ledger: Ledger = new MemoryLedger()): { service: GenerationService; ledger: Ledger } {
  const service = createGenerationService({
    providers: [createScriptedProvider({ models: [fakeModel({ modelId: 'a', price: 3 })] })],
    ledger,
    apiKeys: new MemoryApiKeyStore(),
    auditLog: new MemoryAuditLog(),
    queue: new KeepingQueue(),
    recovery: { onStart: false, intervalMs: 0 },
  });
  services.push(service);
  return { service, ledger };
}

async function refusal(promise: Promise<unknown>): Promise<DomainError> {
  const err = await promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DomainError);
  return err as DomainError;
}

describe('user limits through service.accounts', () => {
  it('sets, merges and clears them (null removes one, a field left out stays), checks every field, and audits each change', async () => {
    const { service } = make();
    expect(await service.accounts.userLimits('alice')).toEqual({ userId: 'alice', inFlight: 0 });
    const set = await service.accounts.setUserLimits('alice', { budget: { amount: 50, period: 'total' }, maxInFlight: 2 }, { actor: 'ops' });
    expect(set).toEqual({ userId: 'alice', budget: { amount: 50, period: 'total' }, maxInFlight: 2, inFlight: 0, spent: 0, remaining: 50 });
    expect(await service.accounts.setUserLimits('alice', { maxInFlight: null }, { actor: 'ops' })).toEqual({
      userId: 'alice',
      budget: { amount: 50, period: 'total' },
      inFlight: 0,
      spent: 0,
      remaining: 50,
    });
    const daily = await service.accounts.setUserLimits('alice', { budget: { amount: 9, period: 'day' } });
    expect(daily.resetsAt).toMatch(/T00:00:00.000Z$/);
    expect(await service.accounts.setUserLimits('alice', { budget: null })).toEqual({ userId: 'alice', inFlight: 0 });
    const bad = await refusal(service.accounts.setUserLimits('alice', { maxInFlight: 0, budget: { amount: -1, period: 'week' as never } }));
    expect(bad.code).toBe('invalid_request');
    expect(bad.details?.map((d) => d.field).sort()).toEqual(['budget.amount', 'budget.period', 'maxInFlight']);
    expect((await refusal(service.accounts.setUserLimits('alice', { other: 1 } as never))).code).toBe('invalid_request');
    const entries = (await service.accounts.auditLog()).data.filter((e) => e.actor === 'ops');
    expect(entries.map((e) => e.action)).toEqual(['user.limits.set', 'user.limits.set']);
    expect(entries[0]).toMatchObject({ userId: 'alice', details: { budget: { amount: 50, period: 'total' }, maxInFlight: null } });
  });

  it('refuses a create at the user\u2019s cap (429) and budget (402, naming it and when it resets), holding nothing; a settle gives back', async () => {
    const { service, ledger } = make();
    await service.accounts.createUser({ userId: 'alice', balance: 100 });
    await service.accounts.setUserLimits('alice', { maxInFlight: 2, budget: { amount: 10, period: 'day' } });
    const first = await service.create('alice', { modelId: 'a' });
    await service.create('alice', { modelId: 'a' });
    const capped = await refusal(service.create('alice', { modelId: 'a' }));
    expect(capped.code).toBe('rate_limited');
    expect(capped.message).toBe('Your user account has 2 generations pending or processing; wait for one to finish.');
    expect((await refusal(service.batches.create('alice', { requests: [{ modelId: 'a' }] }))).code).toBe('rate_limited');
    expect(await service.balance('alice')).toBe(94);
    await ledger.settle(first.generationId, 3);
    await service.create('alice', { modelId: 'a' });
    await service.accounts.setUserLimits('alice', { maxInFlight: null });
    const over = await refusal(service.create('alice', { modelId: 'a' }));
    expect(over.code).toBe('budget_exceeded');
    expect(over.message).toMatch(/^Your user account's daily budget of 10 tokens would be exceeded \(price 3\); it resets at \d{4}-\d\d-\d\dT00:00:00.000Z\.$/);
    expect(await service.balance('alice')).toBe(91);
    expect(await service.accounts.userLimits('alice')).toMatchObject({ inFlight: 2, spent: 9, remaining: 1 });
  });

  it('holds every level together: the organisation, the user and the key each refuse at their own limit, and nothing is held on refusal', async () => {
    const { service } = make();
    await service.accounts.createUser({ userId: 'alice', balance: 1000 });
    await service.accounts.createOrganization({ organizationId: 'acme', budget: { amount: 30, period: 'month' }, maxInFlight: 20 });
    await service.accounts.addMember('acme', { userId: 'alice' });
    await service.accounts.setUserLimits('alice', { budget: { amount: 12, period: 'month' } });
    const key = { userId: 'alice', keyId: 'k1', scopes: ['generate', 'read'] as const, budget: { amount: 6, period: 'day' as const } };
    await service.create('alice', { modelId: 'a' }, { key });
    await service.create('alice', { modelId: 'a' }, { key });
    const byKey = await refusal(service.create('alice', { modelId: 'a' }, { key }));
    expect(byKey.message).toMatch(/^This key's daily budget/);
    await service.create('alice', { modelId: 'a' });
    await service.create('alice', { modelId: 'a' });
    const byUser = await refusal(service.create('alice', { modelId: 'a' }));
    expect(byUser.message).toMatch(/^Your user account's monthly budget of 12 tokens/);
    await service.accounts.setUserLimits('alice', { budget: { amount: 100, period: 'total' } });
    // A budget of another period counts in its own window (`total`: from the change on).
    for (let i = 0; i < 6; i++) await service.create('alice', { modelId: 'a' });
    const byOrg = await refusal(service.create('alice', { modelId: 'a' }));
    expect(byOrg.message).toMatch(/^Your organisation's monthly budget of 30 tokens/);
    expect(await service.accounts.organization('acme')).toMatchObject({ inFlight: 10, spent: 30 });
    expect(await service.accounts.userLimits('alice')).toMatchObject({ inFlight: 10, spent: 18, remaining: 82 });
    expect(await service.balance('alice')).toBe(970);
  });
});
