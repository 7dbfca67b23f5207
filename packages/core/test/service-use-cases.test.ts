import { describe, expect, it, vi } from 'vitest';
import { createGenerationService, DomainError, MemoryApiKeyStore, MemoryLedger, type ModelDefinition } from '@genservice/core';
import { ApiMounts, isCoreAnsweredError } from '@genservice/core/adapter';
import { Generations } from '../src/use-cases/generations.js';

const models: ModelDefinition[] = [
  { modelId: 'a', title: 'A', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 },
  { modelId: 'b', title: 'B', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 },
];

function service() {
  return createGenerationService({
    providers: [{ models, generate: async () => ({ text: 'x' }) }],
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 10 } }),
    runner: { enabled: false },
  });
}

const auth = { authorization: 'Bearer k', 'content-type': 'application/json' };

describe('the HTTP routes and an embedder: one path', () => {
  it('each generation route calls the use case an embedder\u2019s service method calls, with the same arguments, never the service', async () => {
    const s = service();
    // The routes are given the use cases, not the service object: its methods are never called by them.
    const viaService = [vi.spyOn(s, 'create'), vi.spyOn(s, 'get'), vi.spyOn(s, 'cancel'), vi.spyOn(s, 'delete')];
    const create = vi.spyOn(Generations.prototype, 'create');
    const get = vi.spyOn(Generations.prototype, 'get');
    const cancel = vi.spyOn(Generations.prototype, 'cancel');
    const del = vi.spyOn(Generations.prototype, 'delete');
    try {
      const created = await s.handle({ method: 'POST', path: '/v1/generations', headers: { ...auth, 'idempotency-key': 'i1' }, body: '{"modelId":"a"}' });
      expect(created.status).toBe(201);
      const { generationId } = JSON.parse(String(created.body)) as { generationId: string };
      expect(create).toHaveBeenCalledWith('u', { modelId: 'a' }, expect.objectContaining({ idempotencyKey: 'i1', key: expect.objectContaining({ userId: 'u' }) }));
      expect((await s.handle({ method: 'GET', path: `/v1/generations/${generationId}`, headers: auth })).status).toBe(200);
      expect(get).toHaveBeenCalledWith('u', generationId, { baseUrl: undefined });
      expect((await s.handle({ method: 'POST', path: `/v1/generations/${generationId}/cancel`, headers: auth })).status).toBe(200);
      expect(cancel).toHaveBeenCalledWith('u', generationId, { baseUrl: undefined });
      expect((await s.handle({ method: 'DELETE', path: `/v1/generations/${generationId}`, headers: auth })).status).toBe(204);
      expect(del).toHaveBeenCalledWith('u', generationId);
      for (const spy of viaService) expect(spy).not.toHaveBeenCalled();
      // The embedder's methods are the same use case, called the same way.
      const again = await s.create('u', { modelId: 'a' }, { idempotencyKey: 'i1' });
      expect(again.generationId).toBe(generationId);
      expect(create).toHaveBeenLastCalledWith('u', { modelId: 'a' }, { idempotencyKey: 'i1' });
    } finally {
      vi.restoreAllMocks();
    }
  });
});

describe('the embedder\u2019s use cases', () => {
  it('create and quote with a key apply its model allow-list, as on the HTTP API', async () => {
    const s = service();
    const key = { userId: 'u', keyId: 'key1', models: ['a'] };
    await expect(s.create('u', { modelId: 'b' }, { key })).rejects.toMatchObject({ code: 'model_not_found' });
    await expect(s.quote('u', { modelId: 'b' }, { key })).rejects.toMatchObject({ code: 'model_not_found' });
    expect(await s.quote('u', { modelId: 'a' }, { key })).toEqual({ price: 1, balance: 10 });
    // Without a key: every model.
    expect((await s.create('u', { modelId: 'b' })).generationId).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it('delete removes the user\u2019s generation; then it reads as absent, and a second delete is not_found', async () => {
    const s = service();
    const { generationId } = await s.create('u', { modelId: 'a' });
    await s.delete('u', generationId);
    await expect(s.get('u', generationId)).rejects.toBeInstanceOf(DomainError);
    await expect(s.delete('u', generationId)).rejects.toMatchObject({ code: 'not_found' });
    // Another user's id reads as absent too.
    const other = await s.create('u', { modelId: 'a' });
    await expect(s.delete('someone-else', other.generationId)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('listModels hands out a frozen list of frozen models; GET /v1/models answers the same list every time, a key\u2019s allow-list filtered', async () => {
    const s = service();
    const list = s.listModels();
    expect(Object.isFrozen(list)).toBe(true);
    expect(Object.isFrozen(list[0])).toBe(true);
    expect(Object.isFrozen(list[0]!.settings)).toBe(true);
    expect(() => (list as unknown as unknown[]).push({})).toThrow(TypeError);
    expect(() => {
      (list[0] as { title: string }).title = 'changed';
    }).toThrow(TypeError);
    const models = async (authorization: string) => JSON.parse(String((await s.handle({ method: 'GET', path: '/v1/models', headers: { authorization } })).body));
    const first = await models('Bearer k');
    expect(first.models.map((m: { modelId: string }) => m.modelId)).toEqual(['a', 'b']);
    expect(await models('Bearer k')).toEqual(first);
    const { apiKey } = await s.accounts.createKey('u', { name: 'only b', models: ['b'] });
    expect((await models(`Bearer ${apiKey}`)).models.map((m: { modelId: string }) => m.modelId)).toEqual(['b']);
    expect(await models('Bearer k')).toEqual(first);
  });

  it('a webhook given to create is checked like the HTTP body\u2019s', async () => {
    const s = service();
    await expect(s.create('u', { modelId: 'a', webhook: { url: 'http://127.0.0.1/hook' } })).rejects.toBeInstanceOf(DomainError);
  });
});

describe('@genservice/core/adapter helpers for framework hooks', () => {
  it('ApiMounts finds the longest prefix an API URL is under, per server', () => {
    const server = {};
    ApiMounts.of<{ prefix: string; n: number }>(server).add({ prefix: '/api', n: 1 });
    ApiMounts.of<{ prefix: string; n: number }>(server).add({ prefix: '/api/inner', n: 2 });
    const mounts = ApiMounts.of<{ prefix: string; n: number }>(server);
    expect(mounts.find('/api/inner/v1/generations/%ZZ?x=1')).toEqual({ mount: { prefix: '/api/inner', n: 2 }, path: '/v1/generations/%ZZ?x=1' });
    expect(mounts.find('/api/v1')?.mount.n).toBe(1);
    expect(mounts.find('/api/other')).toBeUndefined();
    expect(ApiMounts.of({}).find('/api/v1')).toBeUndefined();
  });

  it('isCoreAnsweredError: body-parser body errors, compressed bodies and Fastify router URL errors only', () => {
    expect(isCoreAnsweredError({ type: 'entity.parse.failed' }, {})).toBe(true);
    expect(isCoreAnsweredError({ type: 'entity.too.large' }, {})).toBe(true);
    expect(isCoreAnsweredError(new Error('boom'), { 'content-encoding': 'gzip' })).toBe(true);
    expect(isCoreAnsweredError(new Error('boom'), {})).toBe(false);
    expect(isCoreAnsweredError(null, {})).toBe(false);
    expect(isCoreAnsweredError({ code: 'FST_ERR_BAD_URL' }, {})).toBe(true);
    expect(isCoreAnsweredError({ code: 'FST_ERR_MAX_PARAM_LENGTH' }, {})).toBe(true);
    expect(isCoreAnsweredError({ code: 'FST_ERR_ASYNC_CONSTRAINT' }, { 'content-encoding': 'gzip' })).toBe(false);
  });
});
