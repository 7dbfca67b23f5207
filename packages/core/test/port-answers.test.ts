import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationRecord,
  type GenerationService,
  type Principal,
} from '@genservice/core';
import { createScriptedProvider, fakeModel } from '@genservice/testing';

/**
 * A port's answer reaches the request path however it comes: a value at once (the key resolver may answer so), a
 * native promise, or another library's thenable. There is one path for all of them: whatever a host plugs in (a
 * subclass that overrides the method, a spy, another implementation) is asked, and a key it refuses stays refused.
 */
const provider = createScriptedProvider({ models: [fakeModel({ modelId: 'echo' })] });

const services: GenerationService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.stop({ timeoutMs: 1000 });
});

async function make(apiKeys: MemoryApiKeyStore, store: MemoryGenerationStore = new MemoryGenerationStore()): Promise<GenerationService> {
  const service = createGenerationService({ providers: [provider], apiKeys, store, ledger: new MemoryLedger({ balances: { alice: 100 } }), runner: { enabled: false } });
  services.push(service);
  await service.start();
  return service;
}

const get = (path: string, key: string) => ({ method: 'GET', path, headers: { authorization: `Bearer ${key}` } });

describe('port answers on the request path', () => {
  it('a resolver that answers at once, without a promise, is taken as it answers: known key 200, unknown 401', async () => {
    const answers: unknown[] = [];
    class Counting extends MemoryApiKeyStore {
      override resolve(apiKey: string): Principal | null | PromiseLike<Principal | null> {
        const out = super.resolve(apiKey);
        answers.push(out);
        return out;
      }
    }
    const service = await make(new Counting({ keys: [{ apiKey: 'key-a', userId: 'alice' }] }));
    expect((await service.handle(get('/v1/models', 'key-a'))).status).toBe(200);
    expect((await service.handle(get('/v1/models', 'key-b'))).status).toBe(401);
    // Plain values, not promises: the port allows it and core checks once whether to await.
    expect(answers).toEqual([expect.objectContaining({ userId: 'alice' }), null]);
  });

  it("a subclass that refuses a key the base class knows is honoured on every route: 401, never the base class's answer", async () => {
    class Revoking extends MemoryApiKeyStore {
      revoked = new Set<string>();
      override async resolve(apiKey: string): Promise<Principal | null> {
        return this.revoked.has(apiKey) ? null : super.resolve(apiKey);
      }
    }
    const keys = new Revoking({ keys: [{ apiKey: 'key-a', userId: 'alice' }] });
    const service = await make(keys);
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: {} });
    expect((await service.handle(get('/v1/models', 'key-a'))).status).toBe(200);
    expect((await service.handle(get(`/v1/generations/${generationId}`, 'key-a'))).status).toBe(200);
    keys.revoked.add('key-a');
    expect((await service.handle(get('/v1/models', 'key-a'))).status).toBe(401);
    expect((await service.handle(get(`/v1/generations/${generationId}`, 'key-a'))).status).toBe(401);
  });

  it('a spy put on the key store after start is called for every request', async () => {
    const keys = new MemoryApiKeyStore({ keys: [{ apiKey: 'key-a', userId: 'alice' }] });
    const service = await make(keys);
    const spy = vi.spyOn(keys, 'resolve').mockResolvedValue(null);
    expect((await service.handle(get('/v1/models', 'key-a'))).status).toBe(401);
    expect(spy).toHaveBeenCalledWith('key-a');
  });

  it("a poll goes through a subclass's get: a store that hides a generation answers 404", async () => {
    const hidden = new Set<string>();
    class Hiding extends MemoryGenerationStore {
      override async get(id: string, ownerId: string): Promise<GenerationRecord | null> {
        return hidden.has(id) ? null : super.get(id, ownerId);
      }
    }
    const service = await make(new MemoryApiKeyStore({ keys: [{ apiKey: 'key-a', userId: 'alice' }, { apiKey: 'key-b', userId: 'bob' }] }), new Hiding());
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: {} });
    const path = `/v1/generations/${generationId}`;
    expect((await service.handle(get(path, 'key-a'))).status).toBe(200);
    expect((await service.handle(get(path, 'key-b'))).status).toBe(404);
    hidden.add(generationId);
    expect((await service.handle(get(path, 'key-a'))).status).toBe(404);
  });
  it("a port that answers with another library's thenable (not a native Promise) is awaited like a promise", async () => {
    // What a query builder or a non-native promise library hands back: awaitable, but not `instanceof Promise`.
    const thenable = <T>(value: Promise<T>): Promise<T> =>
      ({ then: (ok: (v: T) => unknown, ko: (e: unknown) => unknown) => value.then(ok, ko) }) as unknown as Promise<T>;
    class ThenableStore extends MemoryGenerationStore {
      override get(id: string, ownerId: string): Promise<GenerationRecord | null> {
        return thenable(Promise.resolve(super.get(id, ownerId)));
      }
    }
    class ThenableKeys extends MemoryApiKeyStore {
      override resolve(apiKey: string): Promise<Principal | null> {
        return thenable(Promise.resolve(super.resolve(apiKey)));
      }
    }
    const service = await make(new ThenableKeys({ keys: [{ apiKey: 'key-a', userId: 'alice' }, { apiKey: 'key-b', userId: 'bob' }] }), new ThenableStore());
    const { generationId } = await service.create('alice', { modelId: 'echo', settings: {} });
    const path = `/v1/generations/${generationId}`;
    const own = await service.handle(get(path, 'key-a'));
    expect(own.status).toBe(200);
    expect(JSON.parse(own.body as string)).toEqual({ status: 'pending' });
    expect((await service.handle(get(path, 'key-b'))).status).toBe(404);
    expect((await service.handle(get(path, 'key-c'))).status).toBe(401);
    expect((await service.handle(get('/v1/models', 'key-a'))).status).toBe(200);
  });
});
