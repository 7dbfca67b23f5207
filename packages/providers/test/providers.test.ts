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
import { until } from '@genservice/testing';
import { createFalProvider, createReplicateProvider } from '../src/index.js';
import { fakeFal, fakeReplicate, MP3, MP4, PNG, type Fake } from './fakes.js';

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

function finish(service: GenerationService, id: string): Promise<GenerationItem> {
  return until(() => service.details('alice', id), { accept: (d) => d.status === 'completed' || d.status === 'failed', what: `${id} to finish` });
}

async function fake(kind: 'replicate' | 'fal', options: Parameters<typeof fakeReplicate>[1] = {}): Promise<Fake> {
  const f = kind === 'replicate' ? await fakeReplicate(TOKEN, options) : await fakeFal(FAL_KEY, options);
  cleanup.push(() => f.close());
  return f;
}

type Kind = 'image' | 'video' | 'audio' | 'text';

function replicate(f: Fake, resultType: Kind = 'image', results = local) {
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

function fal(f: Fake, resultType: Kind = 'image', results = local) {
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

  it.each([
    ['video', 'video/mp4', MP4],
    ['audio', 'audio/mpeg', MP3],
  ] as const)('stores a %s result with its MIME type', async (resultType, mimeType, bytes) => {
    const f = await fake(kind, { result: resultType });
    const { service, store, blobs } = await serviceWith(make(f, resultType));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: `a ${resultType}` } });
    const d = await finish(service, generationId);
    expect(d.status, JSON.stringify(d)).toBe('completed');
    const blob = await blobs.get((await store.get(generationId, 'alice'))!.resultKey!);
    expect(blob?.mimeType).toBe(mimeType);
    expect(Buffer.from(blob!.bytes).equals(Buffer.from(bytes))).toBe(true);
  });

  it('reports the progress in the upstream logs while the job runs', async () => {
    const f = await fake(kind, { hold: true });
    const { service } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'slow' } });
    const seen = await until(async () => (await service.details('alice', generationId)).progress, 'the progress from the upstream logs');
    // The fakes print tqdm-style bars: 42% (Replicate), 60% (fal).
    expect(seen?.fraction).toBe(kind === 'replicate' ? 0.42 : 0.6);
    f.releaseAll();
    expect((await finish(service, generationId)).status).toBe('completed');
  });

  it('finishes a job that takes a while upstream, after checks that found it running', async () => {
    const f = await fake(kind, { finishAfterMs: 400, checksToFinish: 1 });
    const { service } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'later' } });
    expect((await finish(service, generationId)).status).toBe('completed');
    expect([...f.jobs.values()][0]!.checks).toBeGreaterThan(1);
    expect(f.creates).toBe(1);
  });

  it('gives a text model its text', async () => {
    const f = await fake(kind, { result: 'text' });
    const { service } = await serviceWith(make(f, 'text'));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'world' } });
    const d = await finish(service, generationId);
    expect(d).toMatchObject({ status: 'completed', result: 'Hello, world' });
  });

  it.each([503, 429])('retries a create that answered %i, and still creates one job', async (createStatus) => {
    const f = await fake(kind, { failCreates: 2, createStatus });
    const { service } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'retry me' } });
    expect((await finish(service, generationId)).status).toBe('completed');
    expect(f.createsByPrompt.get('retry me')).toBe(1);
    expect(f.requests.filter((r) => r.method === 'POST').length).toBe(3);
  });

  it('fails at once with invalid_input when the upstream refuses the input (422), without retrying', async () => {
    const f = await fake(kind, { failCreates: kind === 'fal' ? 1 : 0, createStatus: 422 });
    // Replicate's fake refuses an input without a prompt; fal's answers the next create with a validation error.
    const provider =
      kind === 'replicate'
        ? createReplicateProvider({ apiToken: TOKEN, baseUrl: f.url, results: local, models: [{ modelId, title: 'x', resultType: 'image', estimatedGenerationTime: 0.05, price: 5, failureFee: 1, settings: [prompt], model: 'a/b', input: () => ({}) }] })
        : fal(f);
    const { service, ledger } = await serviceWith(provider);
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'x' } });
    const d = await finish(service, generationId);
    expect(d.status).toBe('failed');
    expect(d.error?.code).toBe('invalid_input');
    expect(d.error?.message).toMatch(kind === 'replicate' ? /refused the input: - input: prompt is required/ : /refused the input: prompt: field required/);
    expect(f.requests.filter((r) => r.method === 'POST').length).toBe(1);
    expect(f.jobs.size).toBe(0);
    expect((await ledger.account('alice')).balance).toBe(99);
  });

  it('keeps waiting through status reads that fail (more than the retry budget), then completes the same job', async () => {
    const f = await fake(kind, { failChecks: 5 });
    const { service } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: 'flaky' } });
    const d = await finish(service, generationId);
    expect(d.status, JSON.stringify(d)).toBe('completed');
    expect(f.options.failChecks).toBe(0);
    expect(f.creates).toBe(1);
  });

  it('never shows the credential, even when the upstream echoes it in its error', async () => {
    const secret = kind === 'replicate' ? TOKEN : FAL_KEY;
    const f = await fake(kind, { failPrompt: `leak ${secret}` });
    const { service, store } = await serviceWith(make(f));
    const { generationId } = await service.create('alice', { modelId, settings: { prompt: `leak ${secret}` } });
    const d = await finish(service, generationId);
    expect(d.status).toBe('failed');
    expect(d.error?.message).toContain('[redacted]');
    const rec = await store.get(generationId, 'alice');
    expect(rec?.failureReason).toContain('[redacted]');
    expect(JSON.stringify({ ...d, reason: rec?.failureReason, error: rec?.error })).not.toContain(secret);
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
    await until(() => [...f.jobs.values()].some((j) => j.checks > 0), 'the upstream job to be checked');
    await service.cancel('alice', generationId);
    const d = await finish(service, generationId);
    expect(d.status).toBe('failed');
    expect(d.error?.code).toBe('cancelled');
    await until(() => f.cancels > 0, 'the upstream cancel');
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

describe('fal request URLs', () => {
  it('never sends the key to a response_url on another origin, and builds namespaced request paths', async () => {
    const f = await fake('fal');
    // The fake names its own requests on http://localhost:port, the provider talks to http://127.0.0.1:port.
    f.options.responseOrigin = f.url.replace('127.0.0.1', 'localhost');
    const provider = createFalProvider({
      apiKey: FAL_KEY,
      baseUrl: f.url,
      results: local,
      models: [{ modelId: 'wf', title: 'Workflow', resultType: 'image', estimatedGenerationTime: 0.05, price: 4, settings: [prompt], endpoint: 'workflows/acme/pipeline/run' }],
    });
    const { service, store } = await serviceWith(provider);
    const { generationId } = await service.create('alice', { modelId: 'wf', settings: { prompt: 'workflow' } });
    expect((await finish(service, generationId)).status).toBe('completed');
    const host = new URL(f.url).host;
    for (const r of f.requests) expect(r.host).toBe(host);
    expect(f.requests.some((r) => r.path.startsWith('/workflows/acme/pipeline/requests/') && r.path.includes('/status'))).toBe(true);
    expect((await store.get(generationId, 'alice'))?.remoteHandle).not.toHaveProperty('responseUrl');
  });

  it('keeps the response_url fal gave on its own origin in the handle', async () => {
    const f = await fake('fal');
    const { service, store } = await serviceWith(fal(f));
    const { generationId } = await service.create('alice', { modelId: 'fal-flux', settings: { prompt: 'own' } });
    expect((await finish(service, generationId)).status).toBe('completed');
    const handle = (await store.get(generationId, 'alice'))?.remoteHandle as { requestId: string; responseUrl: string };
    expect(handle.responseUrl).toBe(`${f.url}/fal-ai/flux/requests/${handle.requestId}`);
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

