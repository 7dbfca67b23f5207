import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createOpenAI } from '@ai-sdk/openai';
import { createFal } from '@ai-sdk/fal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createGenerationService,
  MemoryBlobStore,
  MemoryGenerationStore,
  MemoryLedger,
  type GenerationItem,
  type GenerationService,
  type LogLevel,
} from '@genservice/core';
import { encodePng } from '@genservice/demo-models';
import { createAiSdkProvider, sniffMimeType } from '../src/index.js';

const PNG = encodePng({ width: 2, height: 2, data: new Uint8Array(16).fill(90) }, { alpha: false });
const MP3 = Uint8Array.from([0x49, 0x44, 0x33, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0xff, 0xfb, 0x90, 0x64]);
const WAV = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVEfmt '), Buffer.alloc(32)]);

interface Seen {
  method: string;
  path: string;
  authorization?: string;
  contentType?: string;
  body: Buffer;
}

function read(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('close', () => resolve(Buffer.concat(chunks)));
  });
}

/**
 * A local stand-in for api.openai.com/v1 and fal.run, answering in their documented wire formats: images
 * (b64_json), speech (audio bytes), transcriptions (multipart in, verbose JSON out), chat completions; fal's sync
 * endpoint answering `{ images: [{ url }] }` with the file served here too. `failures` makes the next answers fail.
 */
const seen: Seen[] = [];
const failures: number[] = [];
let closedEarly = 0;
let hold = false;
let server: Server;
let base = '';

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const path = req.url ?? '/';
    if (hold) {
      req.on('close', () => closedEarly++);
      return; // never answers: the client gives up (abort)
    }
    const body = await read(req);
    seen.push({ method: req.method ?? '', path, authorization: req.headers.authorization, contentType: req.headers['content-type'], body });
    const json = (status: number, value: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    const failure = failures.shift();
    if (failure) return json(failure, { error: { message: failure === 400 ? 'Your prompt was rejected by the safety system.' : 'Rate limit reached', type: 'invalid_request_error', code: null, param: null } });
    if (path === '/v1/images/generations') {
      return json(200, { created: 1_700_000_000, data: [{ b64_json: Buffer.from(PNG).toString('base64') }] });
    }
    if (path === '/v1/audio/speech') return void res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(Buffer.from(MP3));
    if (path === '/v1/audio/transcriptions') return json(200, { text: 'hello from the recording', language: 'english', duration: 1.5, segments: [] });
    if (path === '/v1/chat/completions') {
      const request = JSON.parse(body.toString('utf8')) as { messages: Array<{ role: string; content: string }> };
      const user = request.messages.find((m) => m.role === 'user')?.content;
      return json(200, {
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1_700_000_000,
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: `You said: ${typeof user === 'string' ? user : JSON.stringify(user)}` }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
      });
    }
    if (path === '/files/result.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from(PNG));
    if (path === '/files/input.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from(PNG));
    if (path === '/files/speech.wav') return void res.writeHead(200, { 'content-type': 'audio/wav' }).end(WAV);
    if (path === '/fal-ai/flux/schnell') return json(200, { images: [{ url: `${base}/files/result.png`, width: 2, height: 2, content_type: 'image/png' }], seed: 1, has_nsfw_concepts: [false] });
    json(404, { error: { message: 'no such route' } });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise((r) => server.close(r)));

const warnings: unknown[] = [];
const logger = {
  level: 'debug' as LogLevel,
  debug: () => undefined,
  info: () => undefined,
  warn: (obj: unknown) => void warnings.push(obj),
  error: () => undefined,
  child() {
    return logger;
  },
};

async function run(service: GenerationService, modelId: string, settings: Record<string, unknown>): Promise<GenerationItem> {
  const { generationId } = await service.create('u', { modelId, settings });
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const d = await service.details('u', generationId);
    if (d.status === 'completed' || d.status === 'failed') return d;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('not finished');
}

describe('AI SDK models (real @ai-sdk/openai and @ai-sdk/fal packages, local fake servers)', () => {
  let service: GenerationService;
  const store = new MemoryGenerationStore();
  const blobs = new MemoryBlobStore();
  const file = async (id: string) => blobs.get((await store.get(id, 'u'))!.resultKey!);

  beforeAll(async () => {
    const openai = createOpenAI({ apiKey: 'sk-test-secret', baseURL: `${base}/v1` });
    const fal = createFal({ apiKey: 'fal-test-secret', baseURL: base });
    service = createGenerationService({
      providers: [
        createAiSdkProvider({
          media: { allowPrivateNetworks: true },
          models: [
            { modelId: 'image', title: 'Image', model: openai.image('gpt-image-1'), price: 8, sizes: ['1024x1024', '1536x1024'], estimatedGenerationTime: 0.05 },
            { modelId: 'dalle', title: 'DALL-E', model: openai.image('dall-e-3'), price: 8, acceptsImage: false, estimatedGenerationTime: 0.05 },
            { modelId: 'tts', title: 'Speech', model: openai.speech('tts-1'), price: 2, voices: ['alloy', 'nova'], estimatedGenerationTime: 0.05 },
            { modelId: 'stt', title: 'Transcription', model: openai.transcription('whisper-1'), price: 2, estimatedGenerationTime: 0.05 },
            { modelId: 'chat', title: 'Chat', model: openai.chat('gpt-4o-mini'), price: 1, estimatedGenerationTime: 0.05, maxAttempts: 3 },
            { modelId: 'fal-image', title: 'Flux on fal', model: fal.image('fal-ai/flux/schnell'), price: 3, aspectRatios: ['1:1', '16:9'], estimatedGenerationTime: 0.05 },
          ],
        }),
      ],
      store,
      blobs,
      ledger: new MemoryLedger({ balances: { u: 1000 } }),
      publicUrl: 'http://api.test',
      runner: { retryBaseDelayMs: 5, retryMaxDelayMs: 20 },
      recovery: { intervalMs: 0 },
      logger,
    });
    await service.start();
  });
  afterAll(() => service.stop({ timeoutMs: 1000 }));

  it('lists each model with the result type of its kind and the settings it takes', () => {
    const models = Object.fromEntries(service.listModels().map((m) => [m.modelId, m]));
    expect(models.image).toMatchObject({ resultType: 'image', settings: [{ name: 'prompt', required: true }, { name: 'size', fieldType: 'select', options: ['1024x1024', '1536x1024'] }, { name: 'seed' }] });
    expect(models.tts).toMatchObject({ resultType: 'audio', settings: [{ name: 'text', required: true }, { name: 'voice', options: ['alloy', 'nova'] }] });
    expect(models.stt).toMatchObject({ resultType: 'text', settings: [{ name: 'audio', fieldType: 'audio', required: true }] });
    expect(models.chat).toMatchObject({ resultType: 'text', settings: [{ name: 'prompt' }, { name: 'system' }] });
    expect(models['fal-image']!.settings.map((s) => s.name)).toEqual(['prompt', 'aspect_ratio', 'seed']);
  });

  it('image: stores the PNG the model made, with its MIME type, and sends the OpenAI request', async () => {
    const d = await run(service, 'image', { prompt: 'a lighthouse', size: '1536x1024', seed: '7' });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    const f = await file(d.generationId);
    expect(f?.mimeType).toBe('image/png');
    expect(Buffer.from(f!.bytes).equals(Buffer.from(PNG))).toBe(true);
    const request = seen.filter((s) => s.path === '/v1/images/generations').at(-1)!;
    expect(request.authorization).toBe('Bearer sk-test-secret');
    expect(JSON.parse(request.body.toString())).toMatchObject({ model: 'gpt-image-1', prompt: 'a lighthouse', n: 1, size: '1536x1024' });
  });

  it('speech: stores the audio, its type sniffed from the bytes', async () => {
    const d = await run(service, 'tts', { text: 'Hello there', voice: 'nova' });
    expect(d.status).toBe('completed');
    expect((await file(d.generationId))?.mimeType).toBe('audio/mpeg');
    expect(JSON.parse(seen.filter((s) => s.path === '/v1/audio/speech').at(-1)!.body.toString())).toMatchObject({ model: 'tts-1', input: 'Hello there', voice: 'nova' });
  });

  it('transcription: fetches the audio setting through the guard and sends it as multipart', async () => {
    const d = await run(service, 'stt', { audio: [`${base}/files/speech.wav`] });
    expect(d).toMatchObject({ status: 'completed', result: 'hello from the recording' });
    const request = seen.filter((s) => s.path === '/v1/audio/transcriptions').at(-1)!;
    expect(request.contentType).toMatch(/^multipart\/form-data/);
    expect(request.body.includes(WAV.subarray(0, 12))).toBe(true);
  });

  it('language: the chat answer is the text result', async () => {
    const d = await run(service, 'chat', { prompt: 'ping', system: 'be brief' });
    expect(d).toMatchObject({ status: 'completed', result: 'You said: ping' });
    const request = JSON.parse(seen.filter((s) => s.path === '/v1/chat/completions').at(-1)!.body.toString()) as { messages: Array<{ role: string }> };
    expect(request.messages.map((m) => m.role)).toEqual(['system', 'user']);
  });

  it('fal image (a result given as a URL): downloaded and stored', async () => {
    const d = await run(service, 'fal-image', { prompt: 'fox', aspect_ratio: '16:9' });
    expect(d.status, JSON.stringify(d)).toBe('completed');
    expect((await file(d.generationId))?.mimeType).toBe('image/png');
    const request = seen.filter((s) => s.path === '/fal-ai/flux/schnell').at(-1)!;
    expect(request.authorization).toBe('Key fal-test-secret');
  });

  it('retries a 429 (APICallError.isRetryable) and succeeds; a 400 fails with a reason, not retried', async () => {
    failures.push(429);
    const ok = await run(service, 'chat', { prompt: 'again' });
    expect(ok).toMatchObject({ status: 'completed', result: 'You said: again' });
    const before = seen.length;
    failures.push(400);
    const bad = await run(service, 'chat', { prompt: 'bad' });
    expect(bad.status).toBe('failed');
    expect(bad.error).toEqual({ code: 'provider_error', message: 'The model provider answered 400.' });
    expect(seen.length - before).toBe(1);
    expect(JSON.stringify(bad)).not.toContain('sk-test-secret');
  });

  it('logs the warnings a model returns', async () => {
    warnings.length = 0;
    // dall-e-3 takes no seed: the OpenAI provider warns that it was ignored.
    const d = await run(service, 'dalle', { prompt: 'x', seed: '3' });
    expect(d.status).toBe('completed');
    expect(warnings.length).toBeGreaterThan(0);
  });

  it('refuses a media URL on a private address unless allowed, as invalid_input', async () => {
    const strict = createGenerationService({
      providers: [createAiSdkProvider({ models: [{ modelId: 'stt', title: 'STT', model: createOpenAI({ apiKey: 'k', baseURL: `${base}/v1` }).transcription('whisper-1'), price: 1 }] })],
      ledger: new MemoryLedger({ balances: { u: 10 } }),
      recovery: { intervalMs: 0 },
    });
    await strict.start();
    try {
      const d = await run(strict, 'stt', { audio: [`${base}/files/speech.wav`] });
      expect(d.status).toBe('failed');
      expect(d.error?.code).toBe('invalid_input');
    } finally {
      await strict.stop({ timeoutMs: 1000 });
    }
  });

  it('passes the abort signal: cancelling closes the request upstream', async () => {
    hold = true;
    try {
      const { generationId } = await service.create('u', { modelId: 'chat', settings: { prompt: 'slow' } });
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && (await service.get('u', generationId)).status !== 'processing') await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 50));
      await service.cancel('u', generationId);
      while (Date.now() < deadline && closedEarly === 0) await new Promise((r) => setTimeout(r, 5));
      expect(closedEarly).toBeGreaterThan(0);
    } finally {
      hold = false;
    }
  });
});

describe('sniffMimeType', () => {
  it('knows the common result formats', () => {
    expect(sniffMimeType(PNG)).toBe('image/png');
    expect(sniffMimeType(MP3)).toBe('audio/mpeg');
    expect(sniffMimeType(WAV)).toBe('audio/wav');
    expect(sniffMimeType(Uint8Array.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(sniffMimeType(Buffer.from('....ftypisom'))).toBe('video/mp4');
    expect(sniffMimeType(Buffer.from('glTF....'))).toBe('model/gltf-binary');
    expect(sniffMimeType(Buffer.from('hello'))).toBeUndefined();
  });
});

describe('configuration errors', () => {
  it('are startup errors with the model named', () => {
    expect(() => createAiSdkProvider({ models: [] })).toThrow(/non-empty/);
    expect(() => createAiSdkProvider({ models: [{ modelId: 'x', title: 'x', price: 1, model: {} as never }] })).toThrow(/x.model is not an AI SDK model/);
    const v2 = { specificationVersion: 'v2', doGenerate: () => undefined };
    expect(() => createAiSdkProvider({ models: [{ modelId: 'old', title: 'x', price: 1, model: v2 as never }] })).toThrow(/specification v2/);
    const bare = { specificationVersion: 'v3', provider: 'p', modelId: 'm', doGenerate: () => undefined };
    expect(() => createAiSdkProvider({ models: [{ modelId: 'which', title: 'x', price: 1, model: bare as never }] })).toThrow(/kind/);
  });
});
