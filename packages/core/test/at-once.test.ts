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
import { resolveAtOnce } from '../src/memory/api-keys.js';

/**
 * The request path reads the in-memory key store and generation store without a promise when they are the library's
 * own classes. Anything else a host plugs in (a subclass that overrides the method, a spy, another implementation)
 * must still be asked through its async method: a key a host's resolver refuses stays refused.
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

describe('reads answered at once from the in-memory ports', () => {
  it('resolveAtOnce answers for the class itself and steps aside for a subclass, a spy or another resolver', async () => {
    const plain = new MemoryApiKeyStore({ keys: [{ apiKey: 'key-a', userId: 'alice' }] });
    expect(resolveAtOnce(plain, 'key-a')).toMatchObject({ userId: 'alice' });
    expect(resolveAtOnce(plain, 'key-b')).toBeNull();

    class Refusing extends MemoryApiKeyStore {
      override async resolve(): Promise<Principal | null> {
        return null;
      }
    }
    expect(resolveAtOnce(new Refusing({ keys: [{ apiKey: 'key-a', userId: 'alice' }] }), 'key-a')).toBeUndefined();

    const spied = new MemoryApiKeyStore({ keys: [{ apiKey: 'key-a', userId: 'alice' }] });
    vi.spyOn(spied, 'resolve');
    expect(resolveAtOnce(spied, 'key-a')).toBeUndefined();

    // The class's own method lent to another object is not the class.
    const borrowed = { resolve: MemoryApiKeyStore.prototype.resolve };
    expect(resolveAtOnce(borrowed, 'key-a')).toBeUndefined();
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
        return thenable(super.get(id, ownerId));
      }
    }
    class ThenableKeys extends MemoryApiKeyStore {
      override resolve(apiKey: string): Promise<Principal | null> {
        return thenable(super.resolve(apiKey));
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
