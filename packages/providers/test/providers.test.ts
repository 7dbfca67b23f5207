import { afterEach, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryBlobStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationItem,
  type GenerationService,
  type RemoteJobProvider,
} from '@genservice/core';
import { createFalProvider, createReplicateProvider } from '../src/index.js';
import { fakeFal, fakeReplicate, PNG, type Fake } from './fakes.js';

const TOKEN = 'r8_secret_token_never_shown';
const FAL_KEY = 'fal-secret-key-never-shown';
const prompt = { name: 'prompt', title: 'Prompt', fieldType: 'text' as const, required: true };
const local = { allowPrivateNetworks: true };

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function serviceWith(provider: RemoteJobProvider) {
  const ledger = new MemoryLedger({ balances: { alice: 100 } });
  const blobs = new MemoryBlobStore();
  const store = new MemoryGenerationStore();
  const service = createGenerationService({
    providers: [provider],
    ledger,
    blobs,
    store,
    apiKeys: new MemoryApiKeyStore(),
    publicUrl: 'http://api.test',
    runner: { retryBaseDelayMs: 5, retryMaxDelayMs: 20 },
    recovery: { intervalMs: 0 },
  });
  await service.start();
  cleanup.push(() => service.stop({ timeoutMs: 1000 }));
  return { service, ledger, blobs, store };
}

async function finish(service: GenerationService, id: string): Promise<GenerationItem> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const d = await service.details('alice', id);
    if (d.status === 'completed' || d.status === 'failed') return d;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`${id} did not finish`);
}

async function fake(kind: 'replicate' | 'fal', options: Parameters<typeof fakeReplicate>[1] = {}): Promise<Fake> {
  const f = kind === 'replicate' ? await fakeReplicate(TOKEN, options) : await fakeFal(FAL_KEY, options);
  cleanup.push(() => f.close());
  return f;
}

function replicate(f: Fake, resultType: 'image' | 'text' = 'image', results = local) {
  return createReplicateProvider({
    apiToken: TOKEN,
    baseUrl: f.url,
    results,
    models: [
      { modelId: 'flux', title: 'Flux', resultType, estimatedGenerationTime: 0.05, price: 5, failureFee: 1, settings: [prompt], model: 'black-forest-labs/flux-schnell' },
      { modelId: 'pinned', title: 'Pinned', resultType, estimatedGenerationTime: 0.05, price: 5, settings: [prompt], version: '5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa', input: (s) => ({ prompt: `pinned ${String(s.prompt)}` }) },
    ],
  });
}

function fal(f: Fake, resultType: 'image' | 'text' = 'image', results = local) {
  return createFalProvider({
    apiKey: FAL_KEY,
    baseUrl: f.url,
    results,
    models: [{ modelId: 'fal-flux', title: 'Flux on fal', resultType, estimatedGenerationTime: 0.05, price: 4, failureFee: 1, settings: [prompt], endpoint: 'fal-ai/flux/schnell' }],
  });
}

describe.each(['replicate', 'fal'] as const)('%s provider against a local fake of its API', (kind) => {
  const make = kind === 'replicate' ? replicate : fal;
  const modelId = kind === 'replicate' ? 'flux' : 'fal-flux';
  const price = kind === 'replicate' ? 5 : 4;

  it('runs a generation as one upstream job: created once, checked until done, the image downloaded and stored', async () => {
    const f = await fake(kind);
    const { service, ledger, store, blobs } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'a red fox' } });
    const d = await finish(service, generationId);
    expect(d.status, JSON.stringify(d)).toBe('completed');
    expect(d.price).toBe(price);
    expect(f.creates).toBe(1);
    expect([...f.jobs.values()][0]!.checks).toBeGreaterThanOrEqual(2);
    // The upstream's file was downloaded and stored: the result URL is this service's, with the same bytes.
    expect(d.result).toMatch(/^http:\/\/api\.test\//);
    const blob = await blobs.get((await store.get(generationId, 'alice'))!.resultKey!);
    expect(blob?.mimeType).toBe('image/png');
    expect(Buffer.from(blob!.bytes).equals(Buffer.from(PNG))).toBe(true);
    expect((await ledger.account('alice')).balance).toBe(100 - price);
    // Credentials only ever in the Authorization header, never in a URL.
    for (const r of f.requests) expect(r.path).not.toContain(kind === 'replicate' ? TOKEN : FAL_KEY);
  });

  it('gives a text model its text', async () => {
    const f = await fake(kind, { result: 'text' });
    const { service } = await serviceWith(make(f, 'text'));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'world' } });
    const d = await finish(service, generationId);
    expect(d).toMatchObject({ status: 'completed', result: 'Hello, world' });
  });

  it('retries a create that answered 503, and still creates one job', async () => {
    const f = await fake(kind, { failCreates: 1 });
    const { service } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'retry me' } });
    expect((await finish(service, generationId)).status).toBe('completed');
    expect(f.createsByPrompt.get('retry me')).toBe(1);
  });

  it('fails with the upstream reason when the job fails, charging the failure fee', async () => {
    const f = await fake(kind, { failPrompt: 'forbidden' });
    const { service, ledger } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'forbidden' } });
    const d = await finish(service, generationId);
    expect(d.status).toBe('failed');
    expect(d.error?.code).toBe('provider_error');
    expect(d.error?.message).toMatch(kind === 'replicate' ? /NSFW content detected/ : /prompt flagged/);
    expect(d.price).toBe(1);
    expect((await ledger.account('alice')).balance).toBe(99);
  });

  it('cancels the upstream job when the generation is cancelled', async () => {
    const f = await fake(kind, { hold: true });
    const { service } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'cancel me' } });
    // Wait until the job exists upstream and has been checked.
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && ![...f.jobs.values()].some((j) => j.checks > 0)) await new Promise((r) => setTimeout(r, 10));
    await service.cancel('alice', generationId);
    const d = await finish(service, generationId);
    expect(d.status).toBe('failed');
    expect(d.error?.code).toBe('cancelled');
    const until = Date.now() + 5000;
    while (Date.now() < until && f.cancels === 0) await new Promise((r) => setTimeout(r, 10));
    expect(f.cancels).toBe(1);
  });

  it('refuses a result URL on a private address unless the host allows it', async () => {
    const f = await fake(kind);
    const { service } = await serviceWith(make(f, 'image', {} as typeof local));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'private' } });
    const d = await finish(service, generationId);
    expect(d.status).toBe('failed');
    expect(d.error?.message).toMatch(/could not be downloaded/);
  });

  it('says the credentials were refused, without ever showing them', async () => {
    const f = await fake(kind);
    const provider =
      kind === 'replicate'
        ? createReplicateProvider({ apiToken: 'wrong-token', baseUrl: f.url, models: [{ modelId, title: 'x', resultType: 'image', estimatedGenerationTime: 0.05, price: 5, settings: [prompt], model: 'a/b' }] })
        : createFalProvider({ apiKey: 'wrong-key', baseUrl: f.url, models: [{ modelId, title: 'x', resultType: 'image', estimatedGenerationTime: 0.05, price: 4, settings: [prompt], endpoint: 'fal-ai/flux' }] });
    const { service } = await serviceWith(provider);
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'x' } });
    const d = await finish(service, generationId);
    expect(d.status).toBe('failed');
    expect(d.error?.message).toMatch(/refused the credentials/);
    expect(JSON.stringify(d)).not.toMatch(/wrong-token|wrong-key/);
  });
});

describe('configuration errors are startup errors', () => {
  it('refuses bad options', () => {
    const m = { modelId: 'm', title: 'M', resultType: 'image' as const, estimatedGenerationTime: 1, price: 1, settings: [prompt] };
    expect(() => createReplicateProvider({ apiToken: '', models: [{ ...m, model: 'a/b' }] })).toThrow(/apiToken/);
    expect(() => createReplicateProvider({ apiToken: 't', models: [] })).toThrow(/models/);
    expect(() => createReplicateProvider({ apiToken: 't', models: [{ ...m, model: 'no-slash' }] })).toThrow(/owner\/name/);
    expect(() => createReplicateProvider({ apiToken: 't', models: [{ ...m } as never] })).toThrow(/exactly one of/);
    expect(() => createReplicateProvider({ apiToken: 't', models: [{ ...m, model: 'a/b' }, { ...m, model: 'a/c' }] })).toThrow(/twice/);
    expect(() => createFalProvider({ apiKey: 'k', models: [{ ...m, endpoint: '../../etc' }] })).toThrow(/endpoint/);
  });

  it('keeps the mapping functions and upstream names out of the listed models', () => {
    const p = createFalProvider({ apiKey: 'k', models: [{ modelId: 'm', title: 'M', resultType: 'image', estimatedGenerationTime: 1, price: 1, settings: [prompt], endpoint: 'a/b', input: (s) => s }] });
    expect(Object.keys(p.models[0]!).sort()).toEqual(['estimatedGenerationTime', 'modelId', 'price', 'resultType', 'settings', 'title']);
  });
});

