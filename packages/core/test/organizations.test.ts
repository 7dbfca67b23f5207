import { afterEach, describe, expect, it } from 'vitest';
import { createGenerationService, DomainError, MemoryApiKeyStore, MemoryAuditLog, MemoryLedger, type GenerationService } from '@genservice/core';
import type { Job, JobQueue, Ledger } from '@genservice/core/ports';
import { createScriptedProvider, fakeModel } from '@genservice/testing';

// Issue 40, item 1: organisations through `service.accounts`, their limits refusing a member's create, and the job
// carrying its tenant to the queue.

const services: GenerationService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop()));
});

/** A queue that keeps what it is given and runs nothing: the jobs stay for the test to read. */
class KeepingQueue implements JobQueue {
  readonly jobs: Job[] = [];
  async enqueue(job: Job): Promise<void> {
    this.jobs.push(job);
  }
  async start(): Promise<void> {}
  async stop(): Promise<void> {}
}

function make(ledger: Ledger = new MemoryLedger()): { service: GenerationService; queue: KeepingQueue; audit: MemoryAuditLog } {
  const queue = new KeepingQueue();
  const audit = new MemoryAuditLog();
  const service = createGenerationService({
    providers: [createScriptedProvider({ models: [fakeModel({ modelId: 'a', price: 3 })] })],
    ledger,
    apiKeys: new MemoryApiKeyStore(),
    auditLog: audit,
    queue,
    recovery: { onStart: false, intervalMs: 0 },
  });
  services.push(service);
  return { service, queue, audit };
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

describe('organisations through service.accounts', () => {
  it('creates one (409 the second time), checks every field, and audits each change', async () => {
    const { service, audit } = make();
    const org = await service.accounts.createOrganization({ organizationId: 'acme', budget: { amount: 50, period: 'total' }, maxInFlight: 2, weight: 5 }, { actor: 'ops' });
    expect(org).toMatchObject({ organizationId: 'acme', budget: { amount: 50, period: 'total' }, maxInFlight: 2, weight: 5, members: [], inFlight: 0, spent: 0, remaining: 50 });
    expect(org.resetsAt).toBeUndefined();
    expect((await refusal(service.accounts.createOrganization({ organizationId: 'acme' }))).code).toBe('conflict');
    const bad = await refusal(service.accounts.createOrganization({ organizationId: 'x', weight: 0, maxInFlight: -1, budget: { amount: 0, period: 'week' as never } }));
    expect(bad.code).toBe('invalid_request');
    expect(bad.details?.map((d) => d.field).sort()).toEqual(['budget.amount', 'budget.period', 'maxInFlight', 'weight']);
    expect(await service.accounts.createOrganization({ organizationId: 'plain' })).toMatchObject({ weight: 1, members: [] });

    expect(await service.accounts.addMember('acme', { userId: 'alice', role: 'admin' }, { actor: 'ops' })).toEqual({ organizationId: 'acme', userId: 'alice', role: 'admin' });
    expect((await refusal(service.accounts.addMember('plain', { userId: 'alice' }))).code).toBe('conflict');
    expect((await refusal(service.accounts.addMember('nope', { userId: 'alice' }))).code).toBe('not_found');
    expect((await refusal(service.accounts.removeMember('plain', 'alice'))).code).toBe('not_found');
    expect((await refusal(service.accounts.organization('nope'))).code).toBe('not_found');
    await service.accounts.removeMember('acme', 'alice', { actor: 'ops' });
    const entries = (await service.accounts.auditLog()).data.filter((e) => e.actor === 'ops');
    expect(entries.map((e) => e.action)).toEqual(['organization.member.remove', 'organization.member.add', 'organization.create']);
    expect(entries[1]).toMatchObject({ userId: 'alice', details: { organizationId: 'acme', role: 'admin' } });
    expect((await audit.list({ limit: 50 })).entries.filter((e) => e.action === 'organization.create')).toHaveLength(2);
  });

  it('refuses a member\u2019s create at the organisation\u2019s budget (402) and cap (429), naming the organisation; a batch is held whole', async () => {
    const { service } = make();
    await service.accounts.createUser({ userId: 'alice', balance: 100 });
    await service.accounts.createUser({ userId: 'bob', balance: 100 });
    await service.accounts.createOrganization({ organizationId: 'acme', budget: { amount: 10, period: 'day' }, maxInFlight: 2 });
    await service.accounts.addMember('acme', { userId: 'alice' });
    await service.accounts.addMember('acme', { userId: 'bob' });
    await service.create('alice', { modelId: 'a' });
    await service.create('bob', { modelId: 'a' });
    const capped = await refusal(service.create('alice', { modelId: 'a' }));
    expect(capped.code).toBe('rate_limited');
    expect(capped.message).toBe('Your organisation has 2 generations pending or processing; wait for one to finish.');
    expect(capped.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    const batch = await refusal(service.batches.create('bob', { requests: [{ modelId: 'a' }] }));
    expect(batch.code).toBe('rate_limited');
    expect(await service.accounts.organization('acme')).toMatchObject({ inFlight: 2, spent: 6, remaining: 4 });
    expect((await service.accounts.organization('acme')).resetsAt).toMatch(/T00:00:00.000Z$/);
  });

  it('names the organisation\u2019s budget in a 402, and holds nothing on the member', async () => {
    const { service } = make();
    await service.accounts.createUser({ userId: 'alice', balance: 100 });
    await service.accounts.createOrganization({ organizationId: 'acme', budget: { amount: 5, period: 'month' } });
    await service.accounts.addMember('acme', { userId: 'alice' });
    await service.create('alice', { modelId: 'a' });
    const over = await refusal(service.create('alice', { modelId: 'a' }));
    expect(over.code).toBe('budget_exceeded');
    expect(over.message).toMatch(/^Your organisation's monthly budget of 5 tokens would be exceeded \(price 3\); it resets at \d{4}-\d\d-01T00:00:00.000Z\.$/);
    expect(await service.accounts.usage('alice')).toBeDefined();
    expect(await service.balance('alice')).toBe(97);
  });

  it('hands the queue each job with its owner\u2019s organisation and weight, and none for a user of no organisation', async () => {
    const { service, queue } = make();
    await service.accounts.createUser({ userId: 'alice', balance: 100 });
    await service.accounts.createUser({ userId: 'solo', balance: 100 });
    await service.accounts.createOrganization({ organizationId: 'acme', weight: 5 });
    await service.accounts.addMember('acme', { userId: 'alice' });
    const { generationId } = await service.create('alice', { modelId: 'a' });
    const { generationId: solo } = await service.create('solo', { modelId: 'a' });
    const { generationIds } = await service.batches.create('alice', { requests: [{ modelId: 'a' }, { modelId: 'a' }] });
    const byId = new Map(queue.jobs.map((j) => [j.generationId, j]));
    expect(byId.get(generationId)).toMatchObject({ ownerId: 'alice', organizationId: 'acme', weight: 5 });
    for (const id of generationIds) expect(byId.get(id)).toMatchObject({ ownerId: 'alice', organizationId: 'acme', weight: 5 });
    expect(byId.get(solo)!.ownerId).toBe('solo');
    expect(byId.get(solo)).not.toHaveProperty('organizationId');
    expect(byId.get(solo)).not.toHaveProperty('weight');
  });

  it('shows usage by member to an organisation admin only (403 for a member and for a user of no organisation)', async () => {
    const { service } = make();
    await service.accounts.createOrganization({ organizationId: 'acme' });
    await service.accounts.addMember('acme', { userId: 'boss', role: 'admin' });
    await service.accounts.addMember('acme', { userId: 'worker' });
    expect(await service.accounts.usage('boss', { groupBy: 'member' })).toEqual({ data: [], total: { count: 0, tokens: 0 } });
    expect((await refusal(service.accounts.usage('worker', { groupBy: 'member' }))).code).toBe('forbidden');
    expect((await refusal(service.accounts.usage('solo', { groupBy: 'member' }))).code).toBe('forbidden');
    expect(await service.accounts.organizationUsage('acme', { groupBy: 'member' })).toEqual({ data: [], total: { count: 0, tokens: 0 } });
    expect((await refusal(service.accounts.organizationUsage('acme', { groupBy: 'model' as never }))).code).toBe('invalid_request');
    expect((await refusal(service.accounts.organizationUsage('nope'))).code).toBe('not_found');
  });

  it('works with a ledger that keeps no organisations: creates as before, groupBy=member is 403, managing them says what is missing', async () => {
    const memory = new MemoryLedger();
    // A host's ledger written before organisations: the port without the OrganizationLedger methods.
    const legacy: Ledger = {
      reserve: (...a) => memory.reserve(...a),
      reserveMany: (...a) => memory.reserveMany(...a),
      settle: (...a) => memory.settle(...a),
      release: (...a) => memory.release(...a),
      balance: (...a) => memory.balance(...a),
      credit: (...a) => memory.credit(...a),
      openAccount: (...a) => memory.openAccount(...a),
      account: (...a) => memory.account(...a),
      openReserves: (...a) => memory.openReserves(...a),
      keySpend: (...a) => memory.keySpend(...a),
      usage: (...a) => memory.usage(...a),
    };
    const { service, queue } = make(legacy);
    await memory.credit('alice', 10);
    await service.create('alice', { modelId: 'a' });
    expect(queue.jobs[0]).not.toHaveProperty('organizationId');
    expect((await refusal(service.accounts.usage('alice', { groupBy: 'member' }))).code).toBe('forbidden');
    await expect(service.accounts.createOrganization({ organizationId: 'acme' })).rejects.toThrow(/Organisations need a ledger that keeps them/);
  });
});
