import { createServer } from 'node:net';
import { createOpenAI } from '@ai-sdk/openai';
import {
  createGenerationService,
  MemoryApiKeyStore,
  MemoryBlobStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationService,
  type HttpResponse,
} from '@genservice/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAiSdkProvider } from '../src/index.js';
import { FakeUpstream, MP3, PNG, recordingLogger, runToEnd, WAV } from './fake-upstream.js';
import { until } from '@genservice/testing';

const SECRET = 'sk-test-secret-0123456789abcdef';
const upstream = new FakeUpstream();
const { logger, warnings } = recordingLogger();
const store = new MemoryGenerationStore();
const blobs = new MemoryBlobStore();
let service: GenerationService;
let unreachableBase = '';

/** A port nothing listens on: a server is started on it and closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

const body = (res: HttpResponse): unknown => JSON.parse(Buffer.from(res.body as Uint8Array | string).toString('utf8'));
const lastJson = (path: string): Record<string, unknown> => JSON.parse(upstream.to(path).at(-1)!.body.toString('utf8'));
const storedFile = async (generationId: string) => blobs.get((await store.get(generationId, 'u'))!.resultKey!);

beforeAll(async () => {
  await upstream.start();
  unreachableBase = `http://127.0.0.1:${await closedPort()}/v1`;
  const openai = createOpenAI({ apiKey: SECRET, baseURL: `${upstream.base}/v1` });
  const fast = { estimatedGenerationTime: 0.05 };
  service = createGenerationService({
    providers: [
      createAiSdkProvider({
        media: { allowPrivateNetworks: true },
        models: [
          { modelId: 'image', title: 'Image', model: openai.image('gpt-image-1'), price: 8, sizes: ['1024x1024', '1536x1024'], ...fast },
          { modelId: 'image-edit', title: 'Image edit', model: openai.image('gpt-image-1'), price: 8, acceptsImage: true, ...fast },
          { modelId: 'dalle', title: 'DALL-E', model: openai.image('dall-e-3'), price: 8, ...fast },
          {
            modelId: 'renamed',
            title: 'Renamed settings',
            model: openai.image('gpt-image-1'),
            price: 8,
            sizes: ['1024x1024', '1536x1024'],
            settings: { prompt: { name: 'description', title: 'Describe the picture' }, size: { name: 'dimensions', options: ['1536x1024'] }, seed: false },
            ...fast,
          },
          {
            modelId: 'quality',
            title: 'Host-added setting',
            model: openai.image('gpt-image-1'),
            price: 8,
            settings: (defaults) => [...defaults.filter((d) => d.name === 'prompt'), { name: 'quality', title: 'Quality', fieldType: 'select', options: ['low', 'high'] }],
            providerOptions: { openai: { background: 'opaque' } },
            callOptions: (s) => ({ providerOptions: { openai: { quality: s.quality } } }),
            ...fast,
          },
          { modelId: 'tts', title: 'Speech', model: openai.speech('tts-1'), price: 2, voices: ['alloy', 'nova'], ...fast },
          { modelId: 'stt', title: 'Transcription', model: openai.transcription('whisper-1'), price: 2, ...fast },
          {
            modelId: 'chat',
            title: 'Chat',
            model: openai.chat('gpt-4o-mini'),
            price: 1,
            temperatures: [0, 0.5, 1],
            maxOutputTokens: [64, 256],
            maxAttempts: 3,
            ...fast,
          },
          { modelId: 'chat-capped', title: 'Chat (capped)', model: openai.chat('gpt-4o-mini'), price: 1, maxOutputTokens: 100, ...fast },
          {
            modelId: 'unreachable',
            title: 'Nowhere',
            model: createOpenAI({ apiKey: SECRET, baseURL: unreachableBase }).chat('gpt-4o-mini'),
            price: 1,
            maxAttempts: 2,
            ...fast,
          },
        ],
      }),
    ],
    store,
    blobs,
    apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'good-key', userId: 'u' }] }),
    ledger: new MemoryLedger({ balances: { u: 10_000 } }),
    publicUrl: 'http://api.test',
    runner: { retryBaseDelayMs: 5, retryMaxDelayMs: 20 },
    recovery: { intervalMs: 0 },
    logger,
  });
  await service.start();
});

afterAll(async () => {
  await service.stop({ timeoutMs: 1000 });
  await upstream.close();
});

describe('@ai-sdk/openai models through a real genservice (fake api.openai.com on 127.0.0.1)', () => {
  it('lists each model with the result type of its kind and the settings it takes', () => {
    const models = Object.fromEntries(service.listModels().map((m) => [m.modelId, m]));
    expect(models.image).toMatchObject({
      resultType: 'image',
      estimatedGenerationTime: 0.05,
      settings: [
        { name: 'prompt', fieldType: 'text', required: true },
        { name: 'size', fieldType: 'select', options: ['1024x1024', '1536x1024'] },
        { name: 'seed', fieldType: 'text' },
      ],
    });
    expect(models['image-edit']!.settings.map((s) => [s.name, s.fieldType])).toEqual([
      ['prompt', 'text'],
      ['seed', 'text'],
      ['image', 'image'],
    ]);
    expect(models.renamed!.settings).toEqual([
      { name: 'description', title: 'Describe the picture', fieldType: 'text', required: true },
      { name: 'dimensions', title: 'Size', fieldType: 'select', options: ['1536x1024'] },
    ]);
    expect(models.tts).toMatchObject({ resultType: 'audio', settings: [{ name: 'text', required: true }, { name: 'voice', options: ['alloy', 'nova'] }] });
    expect(models.stt).toMatchObject({ resultType: 'text', settings: [{ name: 'audio', fieldType: 'audio', required: true }] });
    expect(models.chat).toMatchObject({
      resultType: 'text',
      settings: [{ name: 'prompt' }, { name: 'system' }, { name: 'temperature', options: ['0', '0.5', '1'] }, { name: 'max_output_tokens', options: ['64', '256'] }],
    });
    expect(models['chat-capped']!.settings.map((s) => s.name)).toEqual(['prompt', 'system']);
  });

  it('image over HTTP: POST /v1/generations, poll, and the result URL serves the PNG as image/png', async () => {
    const auth = { authorization: 'Bearer good-key' };
    const created = await service.handle({
      method: 'POST',
      path: '/v1/generations',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ modelId: 'image', settings: { prompt: 'a lighthouse', size: '1536x1024', seed: '7' } }),
    });
    expect(created.status).toBe(201);
    const { generationId } = body(created) as { generationId: string };
    const view = await until(async () => body(await service.handle({ method: 'GET', path: `/v1/generations/${generationId}`, headers: auth })) as { status: string; result?: string; price?: number }, { accept: (v) => v.status !== 'pending' && v.status !== 'processing' });
    expect(view).toMatchObject({ status: 'completed', price: 8 });
    const url = new URL(view.result!);
    expect(url.origin).toBe('http://api.test');
    const file = await service.handle({ method: 'GET', path: `${url.pathname}${url.search}`, headers: {} });
    expect(file.status).toBe(200);
    expect(file.headers['content-type']).toBe('image/png');
    expect(Buffer.from(file.body as Uint8Array).equals(Buffer.from(PNG))).toBe(true);

    const request = upstream.to('/v1/images/generations').at(-1)!;
    expect(request.authorization).toBe(`Bearer ${SECRET}`);
    expect(JSON.parse(request.body.toString())).toMatchObject({ model: 'gpt-image-1', prompt: 'a lighthouse', n: 1, size: '1536x1024' });
  });

  it('image with an input image: fetched through the guard, sent to /v1/images/edits as multipart', async () => {
    const d = await runToEnd(service, 'image-edit', { prompt: 'make it blue', image: [`${upstream.base}/files/input.png`] });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    expect((await storedFile(d.generationId))?.mimeType).toBe('image/png');
    const request = upstream.to('/v1/images/edits').at(-1)!;
    expect(request.contentType).toMatch(/^multipart\/form-data/);
    expect(request.body.includes(Buffer.from(PNG))).toBe(true);
    expect(request.body.toString('latin1')).toContain('make it blue');
    expect(upstream.to('/files/input.png').length).toBeGreaterThan(0);
  });

  it('settings renamed by the host reach the model under the AI SDK names', async () => {
    const d = await runToEnd(service, 'renamed', { description: 'a red fox', dimensions: '1536x1024' });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    expect(lastJson('/v1/images/generations')).toMatchObject({ prompt: 'a red fox', size: '1536x1024' });
    // Unknown to the model now: core refuses the old names at create.
    await expect(service.create('u', { modelId: 'renamed', settings: { prompt: 'x' } })).rejects.toMatchObject({ code: 'invalid_settings' });
  });

  it('a host-added setting reaches the provider through callOptions, merged with the fixed providerOptions', async () => {
    const d = await runToEnd(service, 'quality', { prompt: 'a boat', quality: 'high' });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    expect(lastJson('/v1/images/generations')).toMatchObject({ prompt: 'a boat', quality: 'high', background: 'opaque' });
  });

  it('speech: stores the audio, its MIME type sniffed from the bytes (the model gives none)', async () => {
    const d = await runToEnd(service, 'tts', { text: 'Hello there', voice: 'nova' });
    expect(d.status).toBe('completed');
    const f = await storedFile(d.generationId);
    expect(f?.mimeType).toBe('audio/mpeg');
    expect(Buffer.from(f!.bytes).equals(Buffer.from(MP3))).toBe(true);
    expect(lastJson('/v1/audio/speech')).toMatchObject({ model: 'tts-1', input: 'Hello there', voice: 'nova' });
  });

  it('transcription: fetches the audio setting through the guard and sends it as multipart; the text is the result', async () => {
    const d = await runToEnd(service, 'stt', { audio: [`${upstream.base}/files/speech.wav`] });
    expect(d).toMatchObject({ status: 'completed', result: 'hello from the recording' });
    const request = upstream.to('/v1/audio/transcriptions').at(-1)!;
    expect(request.contentType).toMatch(/^multipart\/form-data/);
    expect(request.body.includes(WAV)).toBe(true);
    expect(request.body.toString('latin1')).toContain('audio/wav');
  });

  it('transcription: an audio setting that is plainly another kind of file fails as invalid_input', async () => {
    const before = upstream.to('/v1/audio/transcriptions').length;
    const d = await runToEnd(service, 'stt', { audio: [`${upstream.base}/files/input.png`] });
    expect(d.error).toEqual({ code: 'invalid_input', message: 'The audio is not a file this model takes (image/png).' });
    expect(upstream.to('/v1/audio/transcriptions').length).toBe(before);
  });

  it('language: system prompt, temperature and the chosen token cap reach the chat request; the answer is the result', async () => {
    const d = await runToEnd(service, 'chat', { prompt: 'ping', system: 'be brief', temperature: '0.5', max_output_tokens: '64' });
    expect(d).toMatchObject({ status: 'completed', result: 'You said: ping' });
    expect(lastJson('/v1/chat/completions')).toMatchObject({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'ping' },
      ],
      temperature: 0.5,
      max_tokens: 64,
      // Streamed, so clients see the answer form (doStream).
      stream: true,
    });

    const capped = await runToEnd(service, 'chat-capped', { prompt: 'pong' });
    expect(capped.status).toBe('completed');
    expect(lastJson('/v1/chat/completions')).toMatchObject({ max_tokens: 100 });
  });

  it('language: an answer the content filter stopped fails, saying so', async () => {
    const d = await runToEnd(service, 'chat', { prompt: 'forbidden' });
    expect(d.error).toEqual({ code: 'provider_error', message: "The model provider's content filter stopped the answer." });
  });

  it('a 429 and a 500 (APICallError.isRetryable) are retried, then the generation completes', async () => {
    const chats = upstream.to('/v1/chat/completions').length;
    upstream.failNext('/v1/chat/completions', 429);
    const ok = await runToEnd(service, 'chat', { prompt: 'again' });
    expect(ok.status).toBe('completed');
    expect(upstream.to('/v1/chat/completions').length - chats).toBe(2);

    const images = upstream.to('/v1/images/generations').length;
    upstream.failNext('/v1/images/generations', 500, 'The server had an error while processing your request.');
    upstream.failNext('/v1/images/generations', 503, 'Overloaded');
    const image = await runToEnd(service, 'image', { prompt: 'after two failures' });
    expect(image.status, JSON.stringify(image)).toBe('completed');
    expect(upstream.to('/v1/images/generations').length - images).toBe(3);
  });

  it('a 400 fails at once with the provider reason, secrets removed', async () => {
    const before = upstream.to('/v1/chat/completions').length;
    upstream.failNext('/v1/chat/completions', 400, `Your request was rejected by the safety system (key ${SECRET}, see https://platform.openai.com/x?token=abc).`);
    const bad = await runToEnd(service, 'chat', { prompt: 'bad' });
    expect(bad.status).toBe('failed');
    expect(bad.error).toEqual({
      code: 'provider_error',
      message: 'The model provider refused the request (HTTP 400): Your request was rejected by the safety system (key [redacted], see [url]',
    });
    expect(upstream.to('/v1/chat/completions').length - before).toBe(1);
    expect(JSON.stringify(bad)).not.toContain('sk-test');
  });

  it('a 401 is not retried and its reason (which may quote the key) is not shown', async () => {
    const before = upstream.to('/v1/audio/speech').length;
    upstream.failNext('/v1/audio/speech', 401, 'Incorrect API key provided: sk-test***cdef.');
    const bad = await runToEnd(service, 'tts', { text: 'x' });
    expect(bad.error).toEqual({ code: 'provider_error', message: 'The model provider refused the credentials of this service (HTTP 401).' });
    expect(upstream.to('/v1/audio/speech').length - before).toBe(1);
  });

  it('an upstream that cannot be reached is retryable; after maxAttempts the generation fails', async () => {
    const d = await runToEnd(service, 'unreachable', { prompt: 'hello?' });
    expect(d.error).toEqual({ code: 'provider_error', message: 'The model provider could not be reached.' });
  });

  it('logs the warnings a model returns', async () => {
    warnings.length = 0;
    // dall-e-3 takes no seed: the OpenAI provider warns that it was ignored.
    const d = await runToEnd(service, 'dalle', { prompt: 'x', seed: '3' });
    expect(d.status).toBe('completed');
    // The line also carries the run's generationId (and traceId with a tracing SDK): the context of every log line.
    expect(warnings).toContainEqual({ obj: expect.objectContaining({ model: 'dalle', warning: { type: 'unsupported', feature: 'seed' } }), msg: 'ai-sdk: the model warned' });
  });

  it('a seed that is not a whole number fails as invalid_input before the model is called', async () => {
    const before = upstream.to('/v1/images/generations').length;
    const d = await runToEnd(service, 'image', { prompt: 'x', seed: 'abc' });
    expect(d.error).toEqual({ code: 'invalid_input', message: 'The seed must be a whole number.' });
    expect(upstream.to('/v1/images/generations').length).toBe(before);
  });

  it('refuses a media URL on a private address unless the host allows it, as invalid_input', async () => {
    const strict = createGenerationService({
      providers: [
        createAiSdkProvider({
          models: [{ modelId: 'stt', title: 'STT', model: createOpenAI({ apiKey: 'k', baseURL: `${upstream.base}/v1` }).transcription('whisper-1'), price: 1 }],
        }),
      ],
      ledger: new MemoryLedger({ balances: { u: 10 } }),
      recovery: { intervalMs: 0 },
      logger,
    });
    await strict.start();
    try {
      const before = upstream.to('/files/speech.wav').length;
      const d = await runToEnd(strict, 'stt', { audio: [`${upstream.base}/files/speech.wav`] });
      expect(d.error).toEqual({ code: 'invalid_input', message: 'The audio could not be fetched (blocked_address).' });
      expect(upstream.to('/files/speech.wav').length).toBe(before);
    } finally {
      await strict.stop({ timeoutMs: 1000 });
    }
  });

  it('passes the abort signal: cancelling closes the request upstream', async () => {
    upstream.hold('/v1/chat/completions');
    try {
      const closed = upstream.closedEarly;
      const holding = upstream.holding;
      const { generationId } = await service.create('u', { modelId: 'chat', settings: { prompt: 'slow' } });
      // The request is upstream (and held there) before the cancel.
      await until(() => upstream.holding > holding, { what: 'the request to reach the upstream', timeoutMs: 5000 });
      await service.cancel('u', generationId);
      await until(() => upstream.closedEarly > closed, { what: 'the upstream request to be closed', timeoutMs: 5000 });
      expect(upstream.closedEarly).toBe(closed + 1);
      expect((await service.get('u', generationId)).status).toBe('failed');
    } finally {
      upstream.release('/v1/chat/completions');
    }
  });
});
